package io.mrd.cli.reliability;

import io.mrd.cli.fixture.DaemonExtension;
import io.mrd.cli.fixture.LiveDaemon;
import io.mrd.cli.Mrd;
import io.mrd.layout.sys.Sizes;
import io.mrd.secondary.MrdClient;
import io.mrd.testing.ChildJvm;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code mrd events --follow} as a process of its own against a live daemon: it prints what a client does while
 * it runs (attach, ALLOC, FREE, gone), and it ends by itself, exit 0, when the daemon stops (its DAEMON_STOPPED
 * the last line) or when it is sent SIGINT (Ctrl-C), with what it printed before intact.
 */
final class JournalFollowTest
{
    static final Duration WAIT = Duration.ofSeconds(60);

    @RegisterExtension
    final DaemonExtension daemons = new DaemonExtension();

    /** The run directory of this test's daemons. */
    private final Path dir = daemons.newDirectory("journal-follow");

    @Test
    void followPrintsAClientsEventsAsTheyHappenAndEndsWhenTheDaemonStops()
    {
        try (LiveDaemon daemon = daemons.launch("journal-follow").in(dir).start("--max-memory", "64MiB");
            ChildJvm follow = follow())
        {
            follow.awaitLine(line -> line.contains("DAEMON_STARTED"), WAIT);
            final int clientId;
            final String range;
            try (MrdClient client = MrdClient.attach(dir))
            {
                clientId = client.clientId();
                follow.awaitLine(line -> line.contains("CLIENT_ATTACHED") && line.contains(" client " + clientId +
                    " "), WAIT);
                final MemorySegment memory = client.allocate(2 * Sizes.MIB);
                range = "[" + Sizes.hex(memory.address()) + ", " + Sizes.hex(memory.address() + 2 * Sizes.MIB) +
                    ")";
                follow.awaitLine(line -> line.contains("ALLOC") && line.contains(range), WAIT);
                client.free(memory);
                follow.awaitLine(line -> line.contains("FREE") && line.contains(range), WAIT);
            }
            follow.awaitLine(line -> line.contains("CLIENT_DISCONNECTED") && line.contains(" client " + clientId +
                " "), WAIT);
            assertTrue(follow.process().isAlive(), "follow runs while the daemon does: " + follow.output());

            assertEquals(0, daemon.terminate(), "the daemon stops on SIGTERM: " + daemon.process().output());
            assertEquals(0, follow.awaitExit(WAIT), "follow ends on the daemon's stop: " + follow.output());
            final List<String> lines = follow.lines();
            assertTrue(lines.getLast().contains("DAEMON_STOPPED"), "the last line: " + follow.output());
            assertEquals(1, lines.stream().filter(l -> l.contains("ALLOC") && l.contains(range)).count(),
                "the ALLOC printed once: " + follow.output());
        }
    }

    @Test
    void sigintEndsFollowCleanly() throws IOException, InterruptedException
    {
        try (LiveDaemon daemon = daemons.launch("journal-follow").in(dir).start("--max-memory", "64MiB");
            ChildJvm follow = follow())
        {
            follow.awaitLine(line -> line.contains("DAEMON_STARTED"), WAIT);
            final Process kill = new ProcessBuilder("kill", "-INT", Long.toString(follow.pid())).inheritIO().start();
            assertEquals(0, kill.waitFor(), "kill -INT " + follow.pid());
            assertEquals(0, follow.awaitExit(WAIT), "follow exits 0 on SIGINT: " + follow.output());
            assertEquals(1, follow.lines().size(), "the DAEMON_STARTED line, nothing else: " + follow.output());
            assertTrue(daemon.isAlive(), "the daemon is not its business");
        }
    }

    private ChildJvm follow()
    {
        return ChildJvm.start("mrd-events-follow", Mrd.class.getName(),
            List.of("events", "--dir", dir.toString(), "--follow"), Map.of(), List.of());
    }
}
