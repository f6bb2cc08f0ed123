package io.mrd.cli.secondaries;

import io.mrd.cli.fixture.LiveDaemon;
import io.mrd.cli.secondaries.SecondaryDriver.Result;
import io.mrd.testing.ChildJvm;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A running {@link SecondaryDriver} on a test's daemon, and its results.
 */
final class Secondary
{
    private final String name;
    private final ChildJvm jvm;

    private Secondary(final String name, final ChildJvm jvm)
    {
        this.name = name;
        this.jvm = jvm;
    }

    /**
     * Starts a {@link SecondaryDriver} on {@code daemon}'s directory, running {@code commands}; the daemon's
     * close kills it.
     */
    static Secondary start(final LiveDaemon daemon, final String name, final String... commands)
    {
        final List<String> args = new ArrayList<>();
        args.add(daemon.dir().toString());
        args.addAll(List.of(commands));
        return new Secondary(name, daemon.startProcess(name, SecondaryDriver.class.getName(), args, Map.of()));
    }

    ChildJvm jvm()
    {
        return jvm;
    }

    /**
     * Waits for the result labelled {@code label}.
     */
    Result await(final String label)
    {
        final String line = jvm.awaitLine(l -> l.startsWith(SecondaryDriver.PREFIX + label + " "), LiveDaemon.TIMEOUT);
        return Result.parse(line).orElseThrow();
    }

    /**
     * Waits for the result labelled {@code label} and checks it succeeded.
     */
    Result awaitOk(final String label)
    {
        final Result result = await(label);
        assertTrue(result.ok(), name + " " + label + " failed: " + result + "\n" + jvm.output());
        return result;
    }

    /**
     * Waits for the result labelled {@code label} and checks it failed with {@code code}.
     */
    Result awaitError(final String label, final String code)
    {
        final Result result = await(label);
        assertTrue(!result.ok() && code.equals(result.fields().get("code")),
            name + " " + label + " should have failed with " + code + ": " + result + "\n" + jvm.output());
        return result;
    }

    /**
     * @return every result printed so far.
     */
    List<Result> results()
    {
        return jvm.lines().stream().flatMap(l -> Result.parse(l).stream()).toList();
    }

    /**
     * Waits until the driver ran its last command and exited with status 0.
     */
    void awaitDone()
    {
        await(SecondaryDriver.END_LABEL);
        assertEquals(0, jvm.awaitExit(LiveDaemon.TIMEOUT), name + " exit status; output:\n" + jvm.output());
    }

    void kill()
    {
        jvm.kill();
    }

    String output()
    {
        return jvm.output();
    }
}
