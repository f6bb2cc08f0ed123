package io.mrd.cli.reliability;

import io.mrd.cli.fixture.DaemonExtension;
import io.mrd.cli.fixture.LiveDaemon;
import io.mrd.cli.fixture.MrdRunner;
import io.mrd.layout.ControlFile;
import io.mrd.layout.sys.Sizes;
import io.mrd.secondary.ClientContext;
import io.mrd.secondary.DaemonDeadException;
import io.mrd.secondary.DaemonEventListener;
import io.mrd.secondary.MrCache;
import io.mrd.secondary.MrdClient;
import io.mrd.testing.DeviceRegistrations;
import io.mrd.testing.EmulatedDevice;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code mrd restart}, the upgrade path: the running daemon hands over (exits 0 leaving its MRs and memory to its
 * holder), a new daemon adopts them, and a client that rides through gaps resumes with it keeping its key; the
 * device counts no registration made again.
 */
final class RestartTest
{
    private static final Duration WAIT = Duration.ofSeconds(60);

    @RegisterExtension
    final DaemonExtension daemons = new DaemonExtension();

    private final Path dir = daemons.newDirectory("restart");
    private final Path library = EmulatedDevice.library();

    @Test
    void restartHandsOverAndTheNewDaemonAdoptsWhileAClientRidesThrough() throws Exception
    {
        final Map<String, String> env = Map.of(EmulatedDevice.LIBRARY_ENV, library.toString());
        final LiveDaemon old = daemons.launch("restart").in(dir).env(env)
            .start("--provider", "ibverbs", "--max-memory", "256MiB");
        final long oldEpoch = old.controlFile().header().epoch();
        final CompletableFuture<Long> adopted = new CompletableFuture<>();
        final CompletableFuture<DaemonDeadException> lost = new CompletableFuture<>();
        final MrdClient client = MrdClient.attach(new ClientContext().dir(dir).name("upgraded")
            .ibverbsLibrary(library.toString()).adoptionWaitMs(60_000).daemonEventListener(new DaemonEventListener()
            {
                public void onDaemonLost(final DaemonDeadException reason, final long noticedAtMs)
                {
                    lost.complete(reason);
                }

                public void onDaemonAdopted(final long epoch, final long gapMs)
                {
                    adopted.complete(gapMs);
                }
            }));
        final MemorySegment memory = client.allocate(4 * Sizes.MIB);
        final MrCache cache = client.newCache();
        final int lkey = cache.lkey(memory.address(), 4096);
        old.awaitHolder();
        final MemorySegment context = client.verbs().context();
        final long registrations = DeviceRegistrations.of(library, context);

        final MrdRunner.Result restart = MrdRunner.mrdProcess(env, List.of("restart", "--dir", dir.toString(),
            "--huge-dir", "none", "--base-virtaddr", Sizes.hex(old.baseVirtaddr()), "--provider", "ibverbs",
            "--max-memory", "256MiB"));
        assertEquals(0, restart.exit(), restart.toString());
        assertTrue(restart.out().contains("mrd handed over: pid " + old.pid()), restart.toString());
        assertTrue(restart.out().contains("mrd started: pid"), restart.toString());
        assertEquals(0, old.process().awaitExit(WAIT), "the old daemon exits 0 once it has handed over");

        final long gapMs = adopted.get(WAIT.toMillis(), TimeUnit.MILLISECONDS);
        try (ControlFile ctl = ControlFile.openReadOnly(dir.resolve(ControlFile.FILE_NAME)))
        {
            assertEquals(oldEpoch, ctl.header().adoptedEpoch(), "the new daemon adopted the old one's state");
            assertNotEquals(old.pid(), ctl.header().pid());
        }
        assertEquals(lkey, cache.lkey(memory.address(), 4096), "the same key after the restart");
        assertEquals(0, DeviceRegistrations.of(library, context) - registrations, "nothing registered again");
        final MemorySegment more = client.allocate(2 * Sizes.MIB);
        assertTrue(more.address() != memory.address(), "the new daemon serves the client");
        assertFalse(lost.isDone(), "the client never counted the daemon lost (gap " + gapMs + " ms)");
        final MrdRunner.Result check = MrdRunner.mrd("check", "--dir", dir.toString());
        assertEquals(0, check.exit(), check.toString());
        client.close();
        final MrdRunner.Result stop = MrdRunner.mrd("stop", "--dir", dir.toString());
        assertEquals(0, stop.exit(), stop.toString());
    }
}
