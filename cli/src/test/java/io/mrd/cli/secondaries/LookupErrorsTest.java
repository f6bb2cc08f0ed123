package io.mrd.cli.secondaries;

import io.mrd.cli.fixture.DaemonExtension;
import io.mrd.cli.fixture.LiveDaemon;
import io.mrd.cli.secondaries.SecondaryDriver.Result;
import io.mrd.layout.sys.Sizes;
import io.mrd.tools.ControlFileSnapshot;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Lookups that must fail, from a secondary process, with a code and a message (issue 4, item 4): a buffer
 * straddling two MRs (EINVAL), an address outside managed memory (ENXIO).
 */
final class LookupErrorsTest
{
    private static final long MIB = Sizes.MIB;

    @RegisterExtension
    final DaemonExtension daemons = new DaemonExtension();

    private LiveDaemon daemon;

    @BeforeEach
    void startDaemon()
    {
        daemon = daemons.start("lookup-errors", "--max-memory", "128MiB");
    }

    /**
     * Two adjacent MRs: A registered before B was allocated, so B's MR (created for B's chunk A+B) excludes
     * A's segments. A buffer from A's last bytes into B has no single lkey.
     */
    @Test
    void bufferStraddlingTwoMrsIsRefusedWithAMessage()
    {
        final String checked = daemon.syncFile("checked").toString();
        final Secondary secondary = Secondary.start(daemon, "straddler",
            "attach",
            "alloc a 4MiB #a",
            "lkey a 64 #a-lkey",
            "alloc b 4MiB #b",
            "lkey b 64 #b-lkey",
            "lkey a@end-64 128 #straddle",
            "lkey a@end-64 64 #a-tail",
            "lkey b 4MiB #b-whole",
            "newcache",
            "lkey a@end-64 128 #straddle-cold",
            "lkey a 8MiB #straddle-whole",
            "await " + checked,
            "close");

        final Result a = secondary.awaitOk("a");
        final Result b = secondary.awaitOk("b");
        final long aEnd = a.number("addr") + a.number("len");
        assertEquals(aEnd, b.number("addr"), "first fit puts B right after A; the test relies on it");
        final String aLkey = secondary.awaitOk("a-lkey").get("lkey");
        final String bLkey = secondary.awaitOk("b-lkey").get("lkey");
        assertNotEquals(aLkey, bLkey, "two MRs");

        // From the local cache, from the global cache (cold cache), and for the whole of both.
        for (final String label : List.of("straddle", "straddle-cold", "straddle-whole"))
        {
            final Result straddle = secondary.awaitError(label, "EINVAL");
            assertTrue(straddle.message().contains("straddles two MRs"), straddle.toString());
            assertTrue(straddle.message().contains(Sizes.hex(aEnd)), "names where A's MR ends: " + straddle);
        }
        // The buffers just inside either MR are fine.
        assertEquals(aLkey, secondary.awaitOk("a-tail").get("lkey"));
        assertEquals(bLkey, secondary.awaitOk("b-whole").get("lkey"));

        final ControlFileSnapshot s = daemon.snapshot();
        final List<ControlFileSnapshot.Mr> active = LiveDaemon.active(s);
        assertEquals(2, active.size(), LiveDaemon.describe(s));
        assertTrue(active.stream().anyMatch(mr -> mr.start() == a.number("addr") && mr.end() == aEnd),
            LiveDaemon.describe(s));
        assertTrue(active.stream().anyMatch(mr -> mr.start() == aEnd && mr.end() == aEnd + 4 * MIB),
            "B's MR excludes A's segments: " + LiveDaemon.describe(s));
        daemon.signal("checked");
        secondary.awaitDone();
    }

    @Test
    void addressOutsideManagedMemoryIsEnxioWithAMessage()
    {
        final long externalBase = daemon.snapshot().header().externalBase();
        final String checked = daemon.syncFile("checked").toString();
        final Secondary secondary = Secondary.start(daemon, "outsider",
            "attach",
            "lkey 0x10000 64 #low",
            "alloc a 2MiB #a",
            "lkey a@end 64 #unallocated",
            "lkey " + Sizes.hex(externalBase + 4096) + " 64 #external",
            "signal " + daemon.syncFile("errors-done") + " #errors-done",
            "await " + checked,
            "lkey a 64 #fine",
            "close");

        final Result low = secondary.awaitError("low", "ENXIO");
        assertTrue(low.message().contains("0x10000") && low.message().contains("not in memory allocated from mrd"),
            low.toString());
        final Result unallocated = secondary.awaitError("unallocated", "ENXIO");
        final long end = secondary.awaitOk("a").number("addr") + 2 * MIB;
        assertTrue(unallocated.message().contains(Sizes.hex(end)) &&
            unallocated.message().contains("not in memory allocated from mrd"), unallocated.toString());
        final Result external = secondary.awaitError("external", "ENXIO");
        assertTrue(external.message().contains("external window"), external.toString());

        secondary.awaitOk("errors-done");
        final ControlFileSnapshot s = daemon.snapshot();
        assertTrue(s.mrs().isEmpty(), "nothing was registered for the failed lookups: " + LiveDaemon.describe(s));
        daemon.signal("checked");
        // The daemon and the client are fine afterwards.
        secondary.awaitOk("fine");
        secondary.awaitDone();
    }
}
