package io.mrd.cli.secondaries;

import io.mrd.cli.fixture.DaemonExtension;
import io.mrd.cli.fixture.LiveDaemon;
import io.mrd.cli.fixture.MrdRunner;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.mrd.cli.secondaries.SecondaryDriver.Result;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.sys.Sizes;
import io.mrd.tools.ControlFileSnapshot;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * MRs shared by secondary processes (issue 4, item 4): the same lkey for the same address in every process,
 * no stale lkey after a FREE, one MR per chunk however many processes and threads create it at once. A real
 * daemon process and {@link SecondaryDriver} processes; the test reads the control file and runs {@code mrd}
 * commands to see what the daemon did.
 */
final class SharedMrTest
{
    private static final long MIB = Sizes.MIB;

    @RegisterExtension
    final DaemonExtension daemons = new DaemonExtension();

    private LiveDaemon daemon;

    @BeforeEach
    void startDaemon()
    {
        daemon = daemons.start("shared-mr", "--max-memory", "256MiB");
    }

    @Test
    void twoSecondariesGetTheSameLkeyForTheSameAddress()
    {
        final String a = daemon.syncFile("a").toString();
        final String checked = daemon.syncFile("checked").toString();
        final Secondary owner = Secondary.start(daemon, "owner",
            "attach name=owner",
            "alloc a 8MiB #alloc",
            "lkey a+4096 1024 #lkey",
            "publish a " + a,
            "await " + checked,
            "close");
        final Secondary other = Secondary.start(daemon, "other",
            "attach name=other",
            "import a " + a,
            "lkey a+4096 1024 #lkey",
            "lkey a+6MiB 4096 #far",
            "lkey a+4096 1024 #again",
            "await " + checked,
            "close");

        final Result allocated = owner.awaitOk("alloc");
        final Result ownerLkey = owner.awaitOk("lkey");
        final Result otherLkey = other.awaitOk("lkey");
        final Result far = other.awaitOk("far");
        final Result again = other.awaitOk("again");
        final long address = allocated.number("addr");

        assertEquals(ownerLkey.get("lkey"), otherLkey.get("lkey"), "same address, same lkey in both processes");
        assertEquals(ownerLkey.get("lkey"), far.get("lkey"), "one MR for the whole 8MiB allocation");
        assertEquals(ownerLkey.get("lkey"), again.get("lkey"));
        assertEquals("1", ownerLkey.get("creates"), "the owner's lookup created the MR: " + ownerLkey);
        assertEquals("0", otherLkey.get("creates"), "the other found it in the global cache: " + otherLkey);
        assertEquals("1", otherLkey.get("global"), otherLkey.toString());
        assertTrue(Long.parseLong(again.get("top")) >= 1, "the repeat was a local hit: " + again);

        final ControlFileSnapshot s = daemon.snapshot();
        final List<ControlFileSnapshot.Mr> active = LiveDaemon.active(s);
        assertEquals(1, active.size(), LiveDaemon.describe(s));
        assertEquals(ownerLkey.number("lkey"), active.getFirst().lkey() & 0xFFFF_FFFFL, LiveDaemon.describe(s));
        assertEquals(address, active.getFirst().start(), LiveDaemon.describe(s));
        assertEquals(address + 8 * MIB, active.getFirst().end(), LiveDaemon.describe(s));

        // A third witness that maps nothing: the mrd tool reading the global cache.
        final MrdRunner.Result lookup = daemon.mrdProcess("lookup", Sizes.hex(address + 6 * MIB));
        assertEquals(0, lookup.exit(), lookup::toString);
        assertTrue(lookup.both().contains("lkey " + ownerLkey.get("lkey")), lookup::toString);

        daemon.signal("checked");
        owner.awaitDone();
        other.awaitDone();
        // The owner detached without freeing: its memory and MR go with its connection.
        daemon.awaitSnapshot("the owner's memory to be reclaimed", after ->
            after.counter(MrdCounter.BYTES_ALLOCATED) == 0 && after.mrs().isEmpty());
    }

    @Test
    void afterFreeReturnsNoSecondaryGetsTheOldLkey()
    {
        final String a = daemon.syncFile("a").toString();
        final String b = daemon.syncFile("b").toString();
        final String cached = daemon.syncFile("cached").toString();
        final String freed = daemon.syncFile("freed").toString();
        // The other secondary's lookups of the freed range happen before the owner allocates it again.
        final String looked = daemon.syncFile("looked").toString();
        final String done = daemon.syncFile("done").toString();
        final Secondary owner = Secondary.start(daemon, "owner",
            "attach name=owner",
            "alloc a 4MiB #alloc",
            "publish a " + a,
            "lkey a 64 #before",
            "await " + cached,
            "free a #free",
            "signal " + freed,
            "lkey a 64 #after-free",
            "await " + looked,
            "alloc b 4MiB #realloc",
            "lkey b 64 #new",
            "publish b " + b,
            "await " + done,
            "close");
        final Secondary other = Secondary.start(daemon, "other",
            "attach name=other",
            "import a " + a,
            "lkey a 64 #before",
            "lkey a+1MiB 64 #cached",
            "signal " + cached,
            "await " + freed,
            "lkey a+1MiB 64 #after-free",
            "lkey a 64 #after-free-again",
            "signal " + looked,
            "import b " + b,
            "lkey a 64 #after-realloc",
            "signal " + done,
            "close");

        final String oldLkey = owner.awaitOk("before").get("lkey");
        assertEquals(oldLkey, other.awaitOk("before").get("lkey"));
        final Result cachedHit = other.awaitOk("cached");
        assertEquals(oldLkey, cachedHit.get("lkey"));
        assertTrue(Long.parseLong(cachedHit.get("top")) >= 1,
            "the other secondary has the entry in its local cache before the free: " + cachedHit);
        owner.awaitOk("free");

        // Freed and not re-allocated: the lookup must fail, in the owner and in the process that had it cached.
        for (final Result afterFree : List.of(owner.awaitError("after-free", "ENXIO"),
            other.awaitError("after-free", "ENXIO"), other.awaitError("after-free-again", "ENXIO")))
        {
            assertTrue(afterFree.message().contains("not in memory allocated from mrd"), afterFree.toString());
            assertTrue(afterFree.fields().get("lkey") == null, afterFree.toString());
        }
        final Result otherAfterFree = other.await("after-free");
        assertTrue(Long.parseLong(otherAfterFree.get("flushes")) >= 1,
            "devGen moved, so the other secondary's cache flushed: " + otherAfterFree);

        // Re-allocated at the same address (first fit) and registered again: a new lkey, never the old one.
        final Result realloc = owner.awaitOk("realloc");
        assertEquals(owner.await("alloc").number("addr"), realloc.number("addr"),
            "first fit gives the freed range again; the rest of this test relies on it");
        final String newLkey = owner.awaitOk("new").get("lkey");
        assertNotEquals(oldLkey, newLkey, "the MR of the re-allocated memory has a new lkey");
        assertEquals(newLkey, other.awaitOk("after-realloc").get("lkey"),
            "the other secondary sees the new MR at the old address");

        owner.awaitDone();
        other.awaitDone();
    }

    @Test
    void concurrentCreatesFromFourProcessesMakeOneMrPerChunk() throws IOException
    {
        // Three chunks that are not virtually contiguous: the owner frees the 2MiB gaps between them.
        final String[] chunkNames = {"a", "b", "c"};
        final List<String> ownerCommands = new ArrayList<>(List.of("attach name=owner",
            "alloc a 4MiB #a", "alloc x 2MiB", "alloc b 4MiB #b", "alloc y 2MiB", "alloc c 4MiB #c",
            "free x", "free y"));
        for (final String chunk : chunkNames)
        {
            ownerCommands.add("publish " + chunk + " " + daemon.syncFile(chunk));
        }
        final String go = daemon.syncFile("go").toString();
        final String race = "race 2 " + go + " 64 a a+3MiB b+1MiB b+3MiB c c+2MiB #race";
        final List<Secondary> secondaries = new ArrayList<>();
        for (int i = 0; i < 4; i++)
        {
            final List<String> commands = new ArrayList<>();
            if (0 == i)
            {
                commands.addAll(ownerCommands);
            }
            else
            {
                commands.add("attach name=racer-" + i);
                for (final String chunk : chunkNames)
                {
                    commands.add("import " + chunk + " " + daemon.syncFile(chunk));
                }
            }
            commands.add("signal " + daemon.syncFile("ready-" + i) + " #ready");
            commands.add(race);
            commands.add("await " + daemon.syncFile("checked"));
            commands.add("close");
            secondaries.add(Secondary.start(daemon, "racer-" + i, commands.toArray(String[]::new)));
        }
        final Secondary owner = secondaries.getFirst();
        final Map<String, Long> chunkStart = new HashMap<>();
        for (final String chunk : chunkNames)
        {
            chunkStart.put(chunk, owner.awaitOk(chunk).number("addr"));
        }
        // Every racer attached and about to start its threads: release them together.
        secondaries.forEach(secondary -> secondary.awaitOk("ready"));
        daemon.signal("go");

        final Map<String, Set<String>> lkeysByChunk = new HashMap<>();
        long createRequests = 0;
        for (final Secondary secondary : secondaries)
        {
            final Result summary = secondary.awaitOk("race");
            createRequests += Long.parseLong(summary.get("createRequests"));
            final List<Result> lookups = secondary.results().stream()
                .filter(r -> r.label().startsWith("race.")).toList();
            assertEquals(12, lookups.size(), secondary.output());
            for (final Result lookup : lookups)
            {
                assertTrue(lookup.ok(), lookup.toString());
                lkeysByChunk.computeIfAbsent(chunkOf(lookup.number("addr"), chunkStart), k -> new HashSet<>())
                    .add(lookup.get("lkey"));
            }
        }
        System.out.println("concurrent creates: " + createRequests +
            " CREATE_MR requests from 8 threads in 4 processes");
        for (final String chunk : chunkNames)
        {
            assertEquals(1, lkeysByChunk.get(chunk).size(), "every thread got one lkey for chunk " + chunk + ": " +
                lkeysByChunk);
        }
        assertEquals(3, lkeysByChunk.values().stream().flatMap(Set::stream).distinct().count(),
            "three chunks, three MRs: " + lkeysByChunk);

        final ControlFileSnapshot s = daemon.snapshot();
        final List<ControlFileSnapshot.Mr> active = LiveDaemon.active(s);
        assertEquals(3, active.size(), LiveDaemon.describe(s));
        assertEquals(3, s.mrs().size(), "nothing DETACHED: " + LiveDaemon.describe(s));
        assertEquals(3L, s.counter(MrdCounter.MRS_CREATED), LiveDaemon.describe(s));
        for (final ControlFileSnapshot.Mr mr : active)
        {
            final String chunk = chunkOf(mr.start(), chunkStart);
            assertEquals(chunkStart.get(chunk), mr.start(), LiveDaemon.describe(s));
            assertEquals(chunkStart.get(chunk) + 4 * MIB, mr.end(), LiveDaemon.describe(s));
            assertEquals(Set.of(Sizes.hex(mr.lkey() & 0xFFFF_FFFFL)), lkeysByChunk.get(chunk));
        }

        // What an operator sees: mrd dump --json, from another process.
        final MrdRunner.Result dump = daemon.mrdProcess("dump", "--json");
        assertEquals(0, dump.exit(), dump::toString);
        final JsonNode mrs = new ObjectMapper().readTree(dump.out()).get("mrs");
        final Set<String> dumped = new HashSet<>();
        mrs.forEach(mr -> dumped.add(mr.get("state").asText() + " " + mr.get("lkey").asText()));
        assertEquals(lkeysByChunk.values().stream().flatMap(Set::stream).map(k -> "ACTIVE " + k)
            .collect(Collectors.toSet()), dumped, dump::toString);
        daemon.assertHealthy("after the concurrent creates");

        daemon.signal("checked");
        secondaries.forEach(Secondary::awaitDone);
    }

    private static String chunkOf(final long address, final Map<String, Long> chunkStart)
    {
        for (final Map.Entry<String, Long> chunk : chunkStart.entrySet())
        {
            if (address >= chunk.getValue() && address < chunk.getValue() + 4 * MIB)
            {
                return chunk.getKey();
            }
        }
        throw new AssertionError(Sizes.hex(address) + " is in none of the chunks " + chunkStart);
    }
}
