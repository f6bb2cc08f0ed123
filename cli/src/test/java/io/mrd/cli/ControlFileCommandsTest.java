package io.mrd.cli;

import io.mrd.cli.fixture.DaemonExtension;
import io.mrd.cli.fixture.MrdRunner.Result;
import io.mrd.testing.PromtoolCheck;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.mrd.layout.Access;
import io.mrd.layout.CacheEntryDescriptor;
import io.mrd.layout.ControlFile;
import io.mrd.layout.ControlFileLayout;
import io.mrd.layout.MemsegListDescriptor;
import io.mrd.layout.MrDescriptor;
import io.mrd.layout.MrEntry;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.Sizes;
import io.mrd.primary.DaemonContext;
import io.mrd.primary.MrdDaemon;
import io.mrd.primary.memory.Allocation;
import io.mrd.primary.mr.MrEngine;
import io.mrd.tools.Format;
import io.mrd.tools.Invariants;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import static io.mrd.cli.CorruptedCopies.assertViolation;
import static io.mrd.cli.CorruptedCopies.checkCopy;
import static io.mrd.cli.CorruptedCopies.getInt;
import static io.mrd.cli.CorruptedCopies.putInt;
import static io.mrd.cli.CorruptedCopies.read;
import static io.mrd.cli.CorruptedCopies.write;
import static io.mrd.cli.fixture.MrdRunner.mrd;
import static io.mrd.layout.sys.Sizes.MIB;
import static io.mrd.layout.sys.Sizes.hex;
import static io.mrd.primary.DaemonSettings.BASE_VIRTADDR;
import static io.mrd.primary.DaemonSettings.CACHE_CAPACITY;
import static io.mrd.primary.DaemonSettings.DIR;
import static io.mrd.primary.DaemonSettings.HUGE_DIR;
import static io.mrd.primary.DaemonSettings.LIST_SIZE;
import static io.mrd.primary.DaemonSettings.MAX_MEMORY;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code mrd dump}, {@code stat}, {@code check} and {@code lookup} against a real daemon started in-process (no
 * socket server needed: the test drives its MR engine directly), the commands run in-process through
 * {@link Mrd#execute}, reading the control file as they would from another process.
 * <p>
 * The scenario, in list 0 (16 segments of 2 MiB), registered bytes kept under 8 MiB so that it runs under a
 * default RLIMIT_MEMLOCK:
 * <pre>
 *   segment   0   1   2   3   4   5   6
 *   owner     7   9   -   9   7   7   7      a1 (seg 0, its seg 1 freed), a4, a2, a3
 *   map       R   x   .   R   a   a   a      MR 0 spans 0-1 but only 0 is live; 1 was re-allocated
 * </pre>
 * plus an external MR over 1 MiB of anonymous memory.
 */
final class ControlFileCommandsTest
{
    private static final long SEGMENT = 2 * MIB;
    private static final ObjectMapper JSON = new ObjectMapper();

    @RegisterExtension
    final DaemonExtension daemons = new DaemonExtension();

    private Path dir;
    private long base;
    private MrdDaemon daemon;
    private MrEngine engine;
    private MemorySegment external;

    private Allocation a1;
    private Allocation a2;
    private Allocation a3;
    private Allocation a4;
    private MrEntry mr0;
    private MrEntry mr1;
    private MrEntry ext;

    @BeforeEach
    void startDaemon()
    {
        daemon = daemons.inProcess("cli-test", new DaemonContext().set(MAX_MEMORY, 64 * MIB).set(LIST_SIZE, 32 * MIB));
        dir = daemon.context().get(DIR);
        base = daemon.context().get(BASE_VIRTADDR);
        engine = daemon.engine();
    }

    /**
     * The daemon first (the extension closes it too, and removes its directory): its external MR covers the
     * test's mapping, which goes after it.
     */
    @AfterEach
    void stopDaemon()
    {
        try
        {
            if (null != daemon)
            {
                daemon.close();
            }
        }
        finally
        {
            if (null != external)
            {
                Posix.munmapQuietly(external.address(), external.byteSize());
            }
        }
    }

    private void buildScenario()
    {
        a1 = engine.allocate(2 * SEGMENT, 7);
        final Allocation gap = engine.allocate(SEGMENT, 9);
        a2 = engine.allocate(SEGMENT, 9);
        engine.freeMemory(gap.address(), gap.length(), 9);
        mr0 = engine.createMr(a1.address() + 4096, 7);
        mr1 = engine.createMr(a2.address() + 100, 9);
        a3 = engine.allocate(3 * SEGMENT, 7);
        external = Posix.map(MIB, Posix.PROT_READ | Posix.PROT_WRITE, Posix.MAP_PRIVATE | Posix.MAP_ANONYMOUS, -1, 0);
        ext = engine.registerExternal(external.address(), MIB, 9, Access.LOCAL);
        // Free a1's second segment (a memory event: MR 0 keeps one live segment), then re-allocate it.
        engine.freeMemory(a1.address() + SEGMENT, SEGMENT, 7);
        a4 = engine.allocate(SEGMENT, 9);

        assertEquals(List.of(0, 2, 3, 4, 1), List.of(a1.firstSegment(), gap.firstSegment(), a2.firstSegment(),
            a3.firstSegment(), a4.firstSegment()), "first-fit placement the scenario relies on");
        assertEquals(List.of(0, 1, 2), List.of(mr0.mr, mr1.mr, ext.mr), "MR slots");
    }

    @Test
    void dumpJsonIsWhatTheTestCreated() throws IOException
    {
        buildScenario();
        final Result run = mrd("dump", "--dir", dir.toString(), "--json");
        assertEquals(0, run.exit(), run.both());
        final JsonNode root = JSON.readTree(run.out());

        final JsonNode daemonNode = root.get("daemon");
        assertEquals(ProcessHandle.current().pid(), daemonNode.get("pid").asLong());
        assertEquals(hex(daemon.controlFile().header().epoch()), daemonNode.get("epoch").asText());
        assertEquals(daemon.controlFile().header().devGen(), daemonNode.get("devGen").asLong());
        assertTrue(daemonNode.get("devGen").asLong() >= 1, "freeing a registered segment bumped devGen");
        assertTrue(daemonNode.get("heartbeatAgeMs").asLong() >= 0);
        assertEquals("soft", daemonNode.get("provider").asText());
        assertEquals(-1, daemonNode.get("pdHandle").asInt(), "no device, no PD handle");
        assertTrue(daemonNode.get("adoptedEpoch").isNull(), "started afresh");

        final JsonNode lists = root.get("memsegLists");
        assertEquals(2, lists.size());
        final JsonNode list0 = lists.get(0);
        assertEquals(0, list0.get("index").asInt());
        assertEquals(hex(base), list0.get("baseVa").asText());
        assertEquals(SEGMENT, list0.get("segmentSize").asLong());
        assertEquals(16, list0.get("segments").asInt());
        assertEquals(List.of(
                List.of(hex(a1.address()), hex(a1.address() + SEGMENT), "7"),
                List.of(hex(a4.address()), hex(a4.end()), "9"),
                List.of(hex(a2.address()), hex(a2.end()), "9"),
                List.of(hex(a3.address()), hex(a3.end()), "7")),
            ranges(list0.get("allocated")), "allocated ranges of list 0, a3's three segments as one");
        assertEquals(0, lists.get(1).get("allocated").size());

        final JsonNode mrs = root.get("mrs");
        assertEquals(3, mrs.size(), mrs.toString());
        assertMr(mrs.get(0), 0, mr0.lkey, a1.address(), a1.end(), 1, false,
            List.of(List.of(hex(a1.address()), hex(a1.address() + SEGMENT))));
        assertMr(mrs.get(1), 1, mr1.lkey, a2.address(), a2.end(), 1, false,
            List.of(List.of(hex(a2.address()), hex(a2.end()))));
        assertMr(mrs.get(2), 2, ext.lkey, external.address(), external.address() + MIB, 1, true,
            List.of(List.of(hex(external.address()), hex(external.address() + MIB))));
        assertEquals(-1, mrs.get(2).get("listIndex").asInt());

        final JsonNode cache = root.get("cache");
        assertEquals(4, cache.get("len").asInt(), "three entries and the sentinel");
        assertEquals((int)daemon.context().get(CACHE_CAPACITY), cache.get("capacity").asInt());
        assertFalse(cache.get("overflow").asBoolean());
        final List<List<String>> expected = new ArrayList<>(List.of(
            List.of(hex(a1.address()), hex(a1.address() + SEGMENT), Format.key(mr0.lkey), "0"),
            List.of(hex(a2.address()), hex(a2.end()), Format.key(mr1.lkey), "1"),
            List.of(hex(external.address()), hex(external.address() + MIB), Format.key(ext.lkey), "2")));
        expected.sort(Comparator.comparing(e -> Sizes.parseAddress(e.get(0))));
        final List<List<String>> entries = new ArrayList<>();
        cache.get("entries").forEach(e -> entries.add(List.of(e.get("start").asText(), e.get("end").asText(),
            e.get("lkey").asText(), e.get("mr").asText())));
        assertEquals(expected, entries);

        assertEquals(0, root.get("clients").size());
        assertNull(root.get("errors"), "no error log without --errors");
    }

    @Test
    void dumpTextMapAndErrors() throws IOException
    {
        buildScenario();
        daemon.errorLog().record(new IllegalStateException("provider hiccup for the dump test"));

        final Result text = mrd("dump", "--dir", dir.toString());
        assertEquals(0, text.exit(), text.both());
        assertTrue(text.out().contains("pid " + ProcessHandle.current().pid()), text.out());
        assertTrue(text.out().contains("tmpfs"), text.out());
        assertTrue(text.out().contains("MRs: 3 ACTIVE, 0 DETACHED"), text.out());
        assertTrue(text.out().contains("lineage       started afresh"), text.out());
        assertTrue(text.out().contains("chunk " + Format.range(a1.address(), a1.address() + SEGMENT)), text.out());
        assertTrue(text.out().contains("segments 4-6  owner client 7"), text.out());
        assertTrue(text.out().contains("global cache: 3 entries"), text.out());
        assertFalse(text.out().contains("provider hiccup"), "the error log only with --errors");

        final Result map = mrd("dump", "--dir", dir.toString(), "--map");
        assertEquals(0, map.exit(), map.both());
        assertTrue(map.out().contains("legend:"), map.out());
        assertTrue(map.out().contains("  +0x0000000  Rx.Raaa. ........"), map.out());
        assertTrue(map.out().contains("  +0x0000000  ........ ........"), "list 1 is free\n" + map.out());
        assertTrue(map.out().contains("R MR 2 [" + hex(external.address())), map.out());
        map.out().lines().forEach(line -> assertTrue(line.length() <= 100, "line over 100 chars: " + line));

        final Result errors = mrd("dump", "--dir", dir.toString(), "--errors");
        assertEquals(0, errors.exit(), errors.both());
        assertTrue(errors.out().contains("error log: 1 distinct error"), errors.out());
        assertTrue(errors.out().contains("provider hiccup for the dump test"), errors.out());

        final Result json = mrd("dump", "--dir", dir.toString(), "--json", "--errors");
        assertEquals(0, json.exit(), json.both());
        final JsonNode errorNodes = JSON.readTree(json.out()).get("errors");
        assertEquals(1, errorNodes.size());
        assertEquals(1, errorNodes.get(0).get("count").asInt());
        assertTrue(errorNodes.get(0).get("exception").asText().contains("provider hiccup"));

        final Result both = mrd("dump", "--dir", dir.toString(), "--json", "--map");
        assertEquals(Mrd.EXIT_USAGE, both.exit(), both.both());
    }

    @Test
    void checkPassesOnTheLiveFileAndCatchesCorruptedCopies() throws IOException
    {
        buildScenario();
        final Result live = mrd("check", "--dir", dir.toString());
        assertEquals(0, live.exit(), live.both());
        assertTrue(live.out().startsWith("consistent: 3 MRs (3 ACTIVE, 0 DETACHED, 3 live chunks), 3 cache entries"),
            live.out());
        assertEquals(List.of(), Invariants.check(daemon.controlFile()), "the checker as tests call it");

        final ControlFileLayout layout = daemon.controlFile().layout();
        final int cacheOffset = layout.cacheOffset();

        final Result clean = checkCopy(dir, "clean", file -> { });
        assertEquals(0, clean.exit(), clean.both());

        final Result swapped = checkCopy(dir, "swapped", file ->
        {
            final byte[] first = read(file, cacheOffset + CacheEntryDescriptor.ENTRY_LENGTH, CacheEntryDescriptor.ENTRY_LENGTH);
            final byte[] second = read(file, cacheOffset + 2 * CacheEntryDescriptor.ENTRY_LENGTH,
                CacheEntryDescriptor.ENTRY_LENGTH);
            write(file, cacheOffset + CacheEntryDescriptor.ENTRY_LENGTH, second);
            write(file, cacheOffset + 2 * CacheEntryDescriptor.ENTRY_LENGTH, first);
        });
        assertViolation(swapped, "global cache not sorted: entry 2");

        final Result lkey = checkCopy(dir, "lkey", file ->
        {
            final int at = cacheOffset + CacheEntryDescriptor.ENTRY_LENGTH + CacheEntryDescriptor.LKEY_OFFSET;
            putInt(file, at, getInt(file, at) ^ 0x5A00);
        });
        assertViolation(lkey, "global cache entry 1 " + Format.range(a1.address(), a1.address() + SEGMENT) +
            " lkey mismatch");

        final Result msN = checkCopy(dir, "msN", file ->
        {
            final int at = layout.mrOffset(0) + MrDescriptor.MS_N_OFFSET;
            putInt(file, at, getInt(file, at) + 1);
        });
        assertViolation(msN, "MR 0: msN 2 is not the popcount of its bitmap, 1");

        final Result freed = checkCopy(dir, "freed", file -> putInt(file, layout.memsegListOffset(0) +
            MemsegListDescriptor.SEGMENTS_OFFSET + a2.firstSegment() * MemsegListDescriptor.SEGMENT_ENTRY_LENGTH +
            MemsegListDescriptor.SEGMENT_OWNER_OFFSET, MemsegListDescriptor.OWNER_FREE));
        assertViolation(freed, "MR 1: live segment " + hex(a2.address()) + " (list 0 segment 3) is not allocated");

        final Result twice = checkCopy(dir, "twice", file ->
        {
            // MR 0's bitmap gets segment 3 (bit 3 from its base 0): MR 1's live segment.
            final int bitmap = layout.mrBitmapOffset(0);
            write(file, bitmap, new byte[] {(byte)(read(file, bitmap, 1)[0] | 0b1000)});
            putInt(file, layout.mrOffset(0) + MrDescriptor.MS_BMP_N_OFFSET, 4);
        });
        assertViolation(twice, "segment " + hex(a2.address()) + " (list 0 segment 3) is a live segment of two MRs");

        final Result missing = checkCopy(dir, "missing",
            file -> putInt(file, io.mrd.layout.HeaderDescriptor.CACHE_LEN_OFFSET, 3));
        assertViolation(missing, "global cache lacks chunk");

        final Result handle = checkCopy(dir, "handle", file -> putInt(file, layout.mrOffset(1) +
            MrDescriptor.DEVICE_HANDLE_OFFSET, 7));
        assertViolation(handle, "MR 1: device handle 7 on a daemon without a device (PD handle -1)");
    }

    @Test
    void lookupFoundAndNotRegistered()
    {
        buildScenario();
        final Result found = mrd("lookup", "--dir", dir.toString(), hex(a1.address() + 12345));
        assertEquals(0, found.exit(), found.both());
        assertEquals(hex(a1.address() + 12345) + " -> MR 0 " + Format.range(a1.address(), a1.address() + SEGMENT) +
            " lkey " + Format.key(mr0.lkey) + " rkey 0x0 access local-write", found.out().strip());

        final Result externalFound = mrd("lookup", "--dir", dir.toString(), Long.toString(external.address() + 10));
        assertEquals(0, externalFound.exit(), externalFound.both());
        assertTrue(externalFound.out().contains("-> MR 2 "), externalFound.out());

        final Result stale = mrd("lookup", "--dir", dir.toString(), hex(a4.address()));
        assertEquals(1, stale.exit(), stale.both());
        assertTrue(stale.out().startsWith(hex(a4.address()) + " not registered: segment 1 of list 0 is allocated to " +
            "client 9"), stale.out());

        final Result free = mrd("lookup", "--dir", dir.toString(), hex(base + 2 * SEGMENT));
        assertEquals(1, free.exit(), free.both());
        assertTrue(free.out().contains("not registered: segment 2 of list 0 is free"), free.out());

        final Result outside = mrd("lookup", "--dir", dir.toString(), "0x1000");
        assertEquals(1, outside.exit(), outside.both());
        assertTrue(outside.out().contains("not registered: outside the memory lists"), outside.out());

        final Result bad = mrd("lookup", "--dir", dir.toString(), "0xZZ");
        assertEquals(Mrd.EXIT_USAGE, bad.exit(), bad.both());
        assertTrue(bad.err().startsWith("mrd lookup: "), bad.err());
    }

    @Test
    void dumpAndLookupShowAccessAndRkeys() throws IOException
    {
        final String remote = "local-write,remote-write,remote-read";
        final Allocation shared = engine.allocate(2 * SEGMENT, 7, Access.REMOTE_WRITE | Access.REMOTE_READ);
        final Allocation local = engine.allocate(SEGMENT, 7);
        final MrEntry sharedMr = engine.createMr(shared.address() + 64, 7);
        final MrEntry localMr = engine.createMr(local.address(), 7);
        assertEquals(shared.end(), sharedMr.end, "an MR never covers memory of two accesses");

        final JsonNode root = JSON.readTree(mrd("dump", "--dir", dir.toString(), "--json").out());
        final JsonNode allocated = root.get("memsegLists").get(0).get("allocated");
        assertEquals(remote, allocated.get(0).get("access").asText());
        assertEquals("local-write", allocated.get(1).get("access").asText());
        final JsonNode mrs = root.get("mrs");
        assertEquals(Format.key(sharedMr.rkey), mrs.get(0).get("rkey").asText());
        assertFalse("0x0".equals(mrs.get(0).get("rkey").asText()), "remote access has an rkey");
        assertEquals(remote, mrs.get(0).get("access").asText());
        assertEquals("0x0", mrs.get(1).get("rkey").asText(), "local access has none");
        assertEquals("local-write", mrs.get(1).get("access").asText());
        final JsonNode entries = root.get("cache").get("entries");
        assertEquals(Format.key(sharedMr.rkey), entries.get(0).get("rkey").asText());
        assertEquals(remote, entries.get(0).get("access").asText());
        assertEquals("0x0", entries.get(1).get("rkey").asText());

        final Result text = mrd("dump", "--dir", dir.toString());
        assertTrue(text.out().contains("rkey " + Format.key(sharedMr.rkey)), text.out());
        assertTrue(text.out().contains("access " + remote), text.out());

        final Result lookup = mrd("lookup", "--dir", dir.toString(), hex(shared.address() + SEGMENT));
        assertEquals(0, lookup.exit(), lookup.both());
        assertEquals(hex(shared.address() + SEGMENT) + " -> MR 0 " + Format.range(shared.address(), shared.end()) +
            " lkey " + Format.key(sharedMr.lkey) + " rkey " + Format.key(sharedMr.rkey) + " access " + remote,
            lookup.out().strip());
        final Result localLookup = mrd("lookup", "--dir", dir.toString(), hex(local.address()));
        assertTrue(localLookup.out().strip().endsWith("lkey " + Format.key(localMr.lkey) + " rkey 0x0 access local-write"),
            localLookup.out());
        assertEquals(0, mrd("check", "--dir", dir.toString()).exit(), "the invariants hold with both accesses");
    }

    @Test
    void statHumanWatchAndPrometheus()
    {
        buildScenario();
        final Result human = mrd("stat", "--dir", dir.toString());
        assertEquals(0, human.exit(), human.both());
        assertTrue(human.out().lines().anyMatch(l -> l.matches("\\s+create requests\\s+2")), human.out());
        assertTrue(human.out().lines().anyMatch(l -> l.matches("\\s+MRs created\\s+3")), human.out());
        assertTrue(human.out().lines().anyMatch(l -> l.matches("\\s+bytes registered\\s+" + (7 * MIB) + "\\s+7MiB")),
            human.out());

        final Result watch = mrd("stat", "--dir", dir.toString(), "--watch", "0.05", "--count", "3");
        assertEquals(0, watch.exit(), watch.both());
        assertEquals(3, watch.out().lines().filter(l -> l.startsWith("mrd counters of pid")).count(), watch.out());

        final Result prometheus = mrd("stat", "--dir", dir.toString(), "--prometheus");
        assertEquals(0, prometheus.exit(), prometheus.both());
        // The Prometheus Java client writes values as doubles (12582912 is 1.2582912E7).
        final Map<String, Long> samples = new HashMap<>();
        final Map<String, String> types = new HashMap<>();
        for (final String line : prometheus.out().lines().toList())
        {
            if (line.startsWith("# TYPE "))
            {
                final String[] parts = line.split(" ");
                types.put(parts[2], parts[3]);
            }
            else if (!line.startsWith("# ") && !line.isEmpty() && types.entrySet().stream().noneMatch(type ->
                type.getValue().equals("histogram") && line.startsWith(type.getKey() + "_")))
            {
                // the histograms' series are StatHistogramsTest's
                assertTrue(line.matches("[a-zA-Z_:][a-zA-Z0-9_:]* -?[0-9.]+(E-?[0-9]+)?"), "not 'name value': " + line);
                final String[] parts = line.split(" ");
                assertNull(samples.put(parts[0], (long)Double.parseDouble(parts[1])), "sample twice: " + line);
            }
        }
        assertEquals(2L, samples.get("mrd_create_requests_total"), prometheus.out());
        assertEquals(3L, samples.get("mrd_mrs_created_total"));
        assertEquals(1L, samples.get("mrd_up"));
        assertEquals(daemon.controlFile().header().devGen(), samples.get("mrd_dev_gen"));
        assertTrue(samples.get("mrd_heartbeat_age_seconds") >= 0);
        assertEquals("counter", types.get("mrd_create_requests_total"));
        assertEquals("gauge", types.get("mrd_registered_bytes"));
        for (final String name : samples.keySet())
        {
            assertTrue(types.containsKey(name) || types.containsKey(name.replaceFirst("_total$", "")),
                "a TYPE line for " + name);
        }
        samples.keySet().forEach(name -> assertTrue(name.startsWith("mrd_"), name));
        PromtoolCheck.assertClean("mrd stat --prometheus", prometheus.out());
    }

    @Test
    void commandsWorkWhileTheDaemonIsBusy() throws Exception
    {
        buildScenario();
        // Fill list 0 so that the churn works in list 1, and give back MR 1 so that the registered bytes stay
        // under a default 8 MiB RLIMIT_MEMLOCK.
        engine.freeMemory(a2.address(), a2.length(), 9);
        engine.allocate(2 * SEGMENT, 12);
        engine.allocate(9 * SEGMENT, 12);
        final AtomicBoolean stop = new AtomicBoolean();
        final AtomicInteger rounds = new AtomicInteger();
        final AtomicReference<Throwable> failure = new AtomicReference<>();
        // Allocate, register, free in list 1, as fast as the engine goes: memory events, rebuilds, devGen bumps.
        final Thread churn = Thread.ofPlatform().name("churn").start(() ->
        {
            try
            {
                while (!stop.get())
                {
                    final Allocation a = engine.allocate(SEGMENT, 11);
                    if (a.listIndex() != 1)
                    {
                        throw new IllegalStateException("churn allocated in list " + a.listIndex());
                    }
                    engine.createMr(a.address(), 11);
                    engine.freeMemory(a.address(), a.length(), 11);
                    rounds.incrementAndGet();
                }
            }
            catch (final Throwable ex)
            {
                failure.set(ex);
            }
        });
        try
        {
            for (int i = 0; i < 5; i++)
            {
                final Result check = mrd("check", "--dir", dir.toString());
                assertEquals(0, check.exit(), check.both());
                final Result dump = mrd("dump", "--dir", dir.toString(), "--json");
                assertEquals(0, dump.exit(), dump.both());
                assertTrue(JSON.readTree(dump.out()).get("mrs").size() >= 2, dump.out());
                final Result lookup = mrd("lookup", "--dir", dir.toString(), hex(a1.address()));
                assertEquals(0, lookup.exit(), lookup.both());
            }
        }
        finally
        {
            stop.set(true);
            churn.join();
        }
        assertNull(failure.get(), () -> "churn failed: " + failure.get());
        assertTrue(rounds.get() > 0, "the churn ran");
        assertEquals(0, mrd("check", "--dir", dir.toString()).exit());
    }

    @Test
    void helpHasExamplesAndErrorsAreOneLine() throws IOException
    {
        for (final String command : List.of("dump", "stat", "check", "lookup"))
        {
            final Result help = mrd(command, "--help");
            assertEquals(0, help.exit(), help.both());
            assertTrue(help.out().contains("Example"), command + " --help has an example:\n" + help.out());
            assertTrue(help.out().contains("Exit codes"), command + " --help gives exit codes:\n" + help.out());
        }
        final Path nowhere = dir.resolve("nowhere");
        for (final String command : List.of("dump", "stat", "check"))
        {
            final Result run = mrd(command, "--dir", nowhere.toString());
            assertEquals(1, run.exit(), run.both());
            assertEquals("mrd " + command + ": ENOENT: no control file at " + nowhere.resolve(ControlFile.FILE_NAME) +
                ": is a daemon running there? start one with 'mrd start --dir " + nowhere + "'", run.err().strip());
        }
        final Result noCopy = mrd("check", "--file", nowhere.toString());
        assertEquals(1, noCopy.exit());
        assertTrue(noCopy.err().startsWith("mrd check: ENOENT: no file at " + nowhere), noCopy.err());

        final Path junk = dir.resolve("junk.ctl");
        Files.write(junk, new byte[8192]);
        final Result notControl = mrd("lookup", "--file", junk.toString(), "0x1000");
        assertEquals(1, notControl.exit());
        assertEquals(1, notControl.err().strip().lines().count(), notControl.err());
        assertTrue(notControl.err().startsWith("mrd lookup: EPROTO: " + junk + " is not an mrd control file"),
            notControl.err());
    }

    // ---------------------------------------------------------------------------------------------------------

    private static void assertMr(
        final JsonNode mr,
        final int index,
        final int lkey,
        final long start,
        final long end,
        final int msN,
        final boolean external,
        final List<List<String>> chunks)
    {
        assertEquals(index, mr.get("index").asInt(), mr.toString());
        assertEquals("ACTIVE", mr.get("state").asText(), mr.toString());
        assertEquals(Format.key(lkey), mr.get("lkey").asText(), mr.toString());
        assertTrue(mr.get("rkey").asText().startsWith("0x"), mr.toString());
        assertEquals(hex(start), mr.get("start").asText(), mr.toString());
        assertEquals(hex(end), mr.get("end").asText(), mr.toString());
        assertEquals(msN, mr.get("msN").asInt(), mr.toString());
        assertEquals(external, mr.get("external").asBoolean(), mr.toString());
        final List<List<String>> actual = new ArrayList<>();
        mr.get("chunks").forEach(c -> actual.add(List.of(c.get("start").asText(), c.get("end").asText())));
        assertEquals(chunks, actual, mr.toString());
    }

    private static List<List<String>> ranges(final JsonNode allocated)
    {
        final List<List<String>> result = new ArrayList<>();
        allocated.forEach(a -> result.add(List.of(a.get("start").asText(), a.get("end").asText(),
            a.get("owner").asText())));
        return result;
    }
}
