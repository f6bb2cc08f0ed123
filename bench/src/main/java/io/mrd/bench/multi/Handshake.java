package io.mrd.bench.multi;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.locks.LockSupport;

/**
 * How the benchmark's processes line up without sleeps as synchronisation: a child prints {@link #READY}
 * once warmed up and waits for the go file; the orchestrator creates it when every child is ready, so that
 * all secondaries measure the same seconds. A child's numbers come back as one {@link #RESULT} line of
 * {@code key=value} pairs.
 */
final class Handshake
{
    static final String READY = "READY";
    static final String RESULT = "RESULT";

    private Handshake()
    {
    }

    /**
     * Waits for {@code file} to exist.
     *
     * @throws IllegalStateException when it does not appear within {@code timeoutMs}.
     */
    static void awaitFile(final Path file, final long timeoutMs)
    {
        final long deadline = System.nanoTime() + timeoutMs * 1_000_000L;
        while (!Files.exists(file))
        {
            if (System.nanoTime() > deadline)
            {
                throw new IllegalStateException("no " + file + " after " + timeoutMs + " ms: the orchestrator is gone?");
            }
            LockSupport.parkNanos(200_000);
        }
    }

    static void touch(final Path file)
    {
        try
        {
            Files.writeString(file, "go\n");
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException("cannot create " + file, ex);
        }
    }

    static String result(final Map<String, ?> values)
    {
        final StringBuilder line = new StringBuilder(RESULT);
        values.forEach((k, v) -> line.append(' ').append(k).append('=').append(v));
        return line.toString();
    }

    /**
     * @return the pairs of a {@link #RESULT} line.
     */
    static Map<String, String> parseResult(final String line)
    {
        final Map<String, String> values = new LinkedHashMap<>();
        for (final String pair : line.substring(RESULT.length()).trim().split("\\s+"))
        {
            final int eq = pair.indexOf('=');
            if (eq > 0)
            {
                values.put(pair.substring(0, eq), pair.substring(eq + 1));
            }
        }
        return values;
    }
}
