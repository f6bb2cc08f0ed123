package io.mrd.cli;

import io.mrd.layout.Access;
import io.mrd.layout.ControlFile;
import io.mrd.layout.HeaderDescriptor;
import io.mrd.layout.Heartbeat;
import io.mrd.layout.MrDescriptor;
import io.mrd.layout.sys.Sizes;
import io.mrd.tools.ControlFileSnapshot;
import io.mrd.tools.DeviceSnapshot;
import io.mrd.tools.Format;
import org.agrona.concurrent.errors.ErrorLogReader;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;

/**
 * {@code mrd dump}: everything the control file holds, read in one consistent snapshot without asking the
 * daemon, as text, JSON or an address map.
 */
@Command(
    name = "dump",
    mixinStandardHelpOptions = true,
    description = {
        "Print what the control file holds: memory, MRs, global cache, clients.",
        "",
        "The daemon header, the memory lists with their allocated ranges and owners,",
        "every MR with its chunks (on several devices, its keys on each), the global",
        "cache and the clients. Reads the control file only (no socket), under the",
        "seqlock, so it works while the daemon is busy and after it died. --map draws",
        "each list instead, one character per segment; --errors adds the daemon's",
        "error log."
    },
    footer = {
        "",
        "Examples:",
        "  mrd dump --dir /tmp/mrd               the whole picture as text",
        "  mrd dump --dir /tmp/mrd --map         what is free, allocated, registered",
        "  mrd dump --dir /tmp/mrd --json | jq -r '.mrs[] | .lkey'",
        "  mrd dump --dir /tmp/mrd --json | jq -r '.mrs[].keys[] | select(.name == \"mlx5_1\") | .lkey'",
        "  mrd dump --file /var/tmp/saved.ctl --errors   a copy, with its error log",
        "",
        "Exit codes: 0 printed, 1 no readable control file, 2 bad command line."
    })
public final class DumpCommand implements Callable<Integer>
{
    /** Lines of each error's stack trace the text dump shows. */
    static final int ERROR_LINES = 12;

    @Mixin
    ControlFileOption controlFileOption;

    @Option(names = "--json", description = "Print JSON with stable keys (addresses as \"0x...\" strings).")
    boolean json;

    @Option(names = "--map", description = "Draw each memory list's address space instead of listing everything.")
    boolean map;

    @Option(names = "--errors", description = "Add the daemon's error log (distinct errors with counts and times).")
    boolean errors;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    public Integer call() throws IOException
    {
        if (json && map)
        {
            throw new CommandLine.ParameterException(spec.commandLine(),
                "--map draws text and --json prints data: choose one");
        }
        final PrintWriter out = spec.commandLine().getOut();
        try (ControlFile ctl = controlFileOption.open())
        {
            final ControlFileSnapshot snapshot = ControlFileSnapshot.read(ctl);
            final List<DumpJson.ErrorEntry> errorLog = errors ? readErrors(ctl) : null;
            if (json)
            {
                out.println(DumpJson.MAPPER.writeValueAsString(DumpJson.build(snapshot, errorLog)));
            }
            else
            {
                printHeader(out, snapshot);
                if (map)
                {
                    out.println();
                    AddressMap.render(snapshot).forEach(out::println);
                }
                else
                {
                    printLists(out, snapshot);
                    printMrs(out, snapshot);
                    printCache(out, snapshot);
                    printClients(out, snapshot);
                }
                if (null != errorLog)
                {
                    printErrors(out, errorLog);
                }
            }
            out.flush();
            return 0;
        }
    }

    static List<DumpJson.ErrorEntry> readErrors(final ControlFile ctl)
    {
        final List<DumpJson.ErrorEntry> entries = new ArrayList<>();
        ErrorLogReader.read(ctl.errorLogBuffer(), (count, first, last, exception) ->
            entries.add(new DumpJson.ErrorEntry(count, first, last, exception)));
        return entries;
    }

    static void printHeader(final PrintWriter out, final ControlFileSnapshot s)
    {
        final ControlFileSnapshot.Header h = s.header();
        out.println("control file  " + describePath(s.path()) + " (" + (h.hugepageBacked() ? "hugetlbfs" : "tmpfs") +
            ", " + Format.size(h.fileLength()) + ", layout " + h.layoutVersion() + ")");
        out.println("daemon        pid " + h.pid() + ", epoch " + Sizes.hex(h.epoch()) + ", started " +
            Instant.ofEpochMilli(h.startTimeMs()) + " (up " +
            Format.duration(s.takenMs() - h.startTimeMs()) + ")");
        out.println("heartbeat     " + heartbeat(s));
        out.println("provider      " + h.provider() + device(h) + ", devGen " + h.devGen() + ", seqlock " + h.seq() +
            (s.consistent() ? "" : " (HELD FOR WRITING: this dump may be torn)"));
        if (s.devices().several())
        {
            out.println("devices       " + s.devices().devices().size() + ": " + String.join(", ",
                s.devices().devices().stream().map(d -> d.number() + " " + d.name() + " PD handle " + d.pdHandle())
                    .toList()));
        }
        out.println("lineage       " + (0 == h.adoptedEpoch() ? "started afresh" :
            "adopted the state of epoch " + Sizes.hex(h.adoptedEpoch())));
        final long capacity = s.lists().stream().mapToLong(l -> (long)l.segmentCount() * l.segmentSize()).sum();
        final long allocated = s.lists().stream().mapToLong(l -> (long)l.allocatedSegments() * l.segmentSize()).sum();
        out.println("memory        base " + Sizes.hex(h.baseVirtaddr()) + ", " + Format.plural(s.lists().size(), "list") +
            " of " + s.layout().segmentsPerList() + " segments of " + Sizes.format(h.segmentSize()) + ", " +
            Sizes.format(allocated) + " allocated of " + Sizes.format(capacity));
        if (h.externalLength() > 0)
        {
            out.println("external      window " + Format.range(h.externalBase(), h.externalBase() + h.externalLength()) +
                " (" + Sizes.format(h.externalLength()) + ")");
        }
    }

    private static String device(final ControlFileSnapshot.Header h)
    {
        return h.pdHandle() == HeaderDescriptor.NO_PD_HANDLE ? "" :
            " on " + (h.device().isEmpty() ? "a device" : h.device()) + ", PD handle " + h.pdHandle();
    }

    static String heartbeat(final ControlFileSnapshot s)
    {
        final Heartbeat.State heartbeat = s.heartbeat();
        return switch (heartbeat.liveness())
        {
            case CLOSED -> "closed: the daemon shut down cleanly";
            case ALIVE -> heartbeat.ageMs() + " ms ago";
            case STALE -> heartbeat.ageMs() + " ms ago: NOT RESPONDING (stale after " + heartbeat.staleLimitMs() +
                " ms): the daemon is stuck or dead";
        };
    }

    private static String describePath(final Path path)
    {
        if (Files.isSymbolicLink(path))
        {
            try
            {
                return path + " -> " + Files.readSymbolicLink(path);
            }
            catch (final IOException ex)
            {
                return path.toString();
            }
        }
        return path.toString();
    }

    private static void printLists(final PrintWriter out, final ControlFileSnapshot s)
    {
        out.println();
        out.println("memory lists");
        for (final ControlFileSnapshot.MemsegList list : s.lists())
        {
            out.println("  list " + list.index() + "  " + Format.range(list.baseVa(), list.endVa()) + "  " +
                list.segmentCount() + " x " + Sizes.format(list.segmentSize()) + ", " + list.allocatedSegments() +
                " allocated, backing " + list.backingPath() + " (" + (list.hugetlbfs() ? "hugetlbfs" : "tmpfs") + ")");
            final List<ControlFileSnapshot.Allocated> allocations = list.allocations();
            if (allocations.isEmpty())
            {
                out.println("    nothing allocated");
            }
            for (final ControlFileSnapshot.Allocated a : allocations)
            {
                out.printf("    %s %8s  segments %s  owner %s  access %s%n", Format.range(a.start(), a.end()),
                    Sizes.format(a.end() - a.start()), Format.segments(a.firstSegment(), a.segmentCount()),
                    Format.owner(s, a.owner()), Access.describe(a.access()));
            }
        }
    }

    private static void printMrs(final PrintWriter out, final ControlFileSnapshot s)
    {
        out.println();
        final long active = s.mrs().stream().filter(ControlFileSnapshot.Mr::active).count();
        out.println("MRs: " + active + " ACTIVE, " + (s.mrs().size() - active) + " DETACHED (" +
            s.layout().mrCapacity() + " slots, high-water " + s.header().mrHighWater() + ")");
        for (final ControlFileSnapshot.Mr mr : s.mrs())
        {
            final String where = mr.external() ? "external" :
                "list " + mr.listIndex() + " segments " + Format.segments(mr.msBaseIdx(), mr.msBmpN()) + ", msN " +
                    mr.msN() + "/" + mr.msBmpN();
            out.printf("  MR %-4d %-8s lkey %-10s rkey %-10s %s %8s  %s  owner %s  access %s%s%n", mr.index(),
                mr.stateName(), Format.key(mr.lkey()), Format.key(mr.rkey()), Format.range(mr.start(), mr.end()),
                Format.size(mr.length()), where, Format.owner(s, mr.owner()), Access.describe(mr.access()),
                mr.deviceHandle() == MrDescriptor.NO_DEVICE_HANDLE ? "" : "  handle " + mr.deviceHandle());
            printKeys(out, s.devices(), mr);
            for (final ControlFileSnapshot.Chunk chunk : mr.chunks())
            {
                out.printf("      chunk %s %8s%n", Format.range(chunk.start(), chunk.end()),
                    Format.size(chunk.end() - chunk.start()));
            }
            if (mr.chunks().isEmpty())
            {
                out.println("      no live chunk: waits for garbage collection");
            }
        }
    }

    /**
     * An MR's keys on each device, one line each, when there are several (with one, the MR's line has them); a
     * device its access does not place it on says so.
     */
    private static void printKeys(final PrintWriter out, final DeviceSnapshot devices, final ControlFileSnapshot.Mr mr)
    {
        if (!devices.several())
        {
            return;
        }
        for (final DeviceSnapshot.Device device : devices.devices())
        {
            final DeviceSnapshot.Keys keys = devices.keys(mr.index(), device.number());
            if (!Access.isOn(mr.access(), device.number()))
            {
                out.printf("      device %d %-12s not placed (no MR)%n", device.number(), device.name());
                continue;
            }
            out.printf("      device %d %-12s lkey %-10s rkey %-10s handle %d%n", device.number(), device.name(),
                Format.key(keys.lkey()), Format.key(keys.rkey()), keys.deviceHandle());
        }
    }

    private static void printCache(final PrintWriter out, final ControlFileSnapshot s)
    {
        out.println();
        final ControlFileSnapshot.Cache cache = s.cache();
        out.println("global cache: " + cache.entries().size() + " entries (len " + cache.len() + " with the sentinel, " +
            "capacity " + cache.capacity() + "), " + (cache.overflow() ?
                "OVERFLOW: lookups scan the MR table until a rebuild fits" : "no overflow"));
        for (final ControlFileSnapshot.CacheEntry e : cache.entries())
        {
            out.printf("  %6d  %s %8s  lkey %-10s rkey %-10s MR %d  access %s%n", e.index(),
                Format.range(e.start(), e.end()), Format.size(e.end() - e.start()), Format.key(e.lkey()),
                Format.key(e.rkey()), e.mr(), Access.describe(e.access()));
        }
    }

    private static void printClients(final PrintWriter out, final ControlFileSnapshot s)
    {
        out.println();
        out.println("clients: " + s.clients().size() + " connected");
        for (final ControlFileSnapshot.Client c : s.clients())
        {
            out.printf("  client %-4d pid %-8d uid %-6d gid %-6d %-20s connected %s ago%n", c.id(), c.pid(), c.uid(),
                c.gid(), c.name().isEmpty() ? "-" : c.name(),
                Format.duration(s.takenMs() - c.connectedMs()));
        }
    }

    private static void printErrors(final PrintWriter out, final List<DumpJson.ErrorEntry> errors)
    {
        out.println();
        out.println("error log: " + Format.plural(errors.size(), "distinct error"));
        for (final DumpJson.ErrorEntry e : errors)
        {
            out.println("  " + e.count() + " x, first " + Instant.ofEpochMilli(e.firstMs()) + ", last " +
                Instant.ofEpochMilli(e.lastMs()));
            final String[] lines = e.exception().split("\n");
            for (int i = 0; i < Math.min(lines.length, ERROR_LINES); i++)
            {
                out.println("    " + lines[i].stripTrailing());
            }
            if (lines.length > ERROR_LINES)
            {
                out.println("    ... " + (lines.length - ERROR_LINES) + " more lines (all of them with --json)");
            }
        }
    }
}
