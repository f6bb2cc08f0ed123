package io.mrd.primary.server;

import io.mrd.layout.MrdCounter;
import io.mrd.layout.sys.Sizes;
import io.mrd.primary.DaemonContext;
import io.mrd.primary.MrdDaemon;
import io.mrd.primary.TestContexts;
import io.mrd.testing.Wait;

import java.nio.file.Path;
import java.time.Duration;
import java.util.function.Consumer;

import static io.mrd.primary.DaemonSettings.MAX_EXTERNAL;

/**
 * A real daemon in this JVM, small (64 MiB in two lists of 32 MiB, 64 MRs, a 1024-entry cache, a 64 MiB
 * external window, no hugepages), for tests that talk to its socket.
 */
final class ServerFixture implements AutoCloseable
{
    static final long SEGMENT = 2 * Sizes.MIB;
    static final Duration WAIT = Duration.ofSeconds(15);

    final MrdDaemon daemon;
    final Path dir;

    ServerFixture(final Path dir, final long base)
    {
        this(dir, base, context -> {});
    }

    ServerFixture(final Path dir, final long base, final Consumer<DaemonContext> customize)
    {
        this.dir = dir;
        final DaemonContext context = TestContexts.small(dir, base).set(MAX_EXTERNAL, 64 * Sizes.MIB);
        customize.accept(context);
        daemon = MrdDaemon.launch(context);
    }

    Path socket()
    {
        return daemon.runDirectory().socketFile();
    }

    RawClient connect()
    {
        return RawClient.connect(socket());
    }

    long counter(final MrdCounter counter)
    {
        return daemon.counters().get(counter).get();
    }

    /**
     * {@link Wait#await} with this fixture's deadline.
     */
    static void await(final String what, final Wait.Condition condition)
    {
        Wait.await(what, WAIT, condition);
    }

    public void close()
    {
        daemon.close();
    }
}
