package io.mrd.primary.server;

import io.mrd.layout.MrdCounter;
import io.mrd.layout.sys.Sizes;
import io.mrd.primary.DaemonContext;
import io.mrd.primary.MrdDaemon;
import io.mrd.primary.TestContexts;

import java.nio.file.Path;
import java.time.Duration;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;

import static io.mrd.primary.DaemonSettings.MAX_EXTERNAL;
import static org.junit.jupiter.api.Assertions.fail;

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

    /**
     * Test classes use bases 1 TiB apart, clear of the memory and engine tests' bases, so that none can collide
     * even if a failed one leaked a reservation.
     */
    static long base(final int testClass)
    {
        return 0x2000_0000_0000L + (60 + testClass) * 0x100_0000_0000L;
    }

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

    static void await(final String what, final BooleanSupplier condition)
    {
        final long deadline = System.nanoTime() + WAIT.toNanos();
        while (!condition.getAsBoolean())
        {
            if (System.nanoTime() - deadline > 0)
            {
                fail("timed out after " + WAIT.toSeconds() + " s waiting for " + what);
            }
            Thread.onSpinWait();
            try
            {
                Thread.sleep(5);
            }
            catch (final InterruptedException ex)
            {
                Thread.currentThread().interrupt();
                fail("interrupted waiting for " + what);
            }
        }
    }

    public void close()
    {
        daemon.close();
    }
}
