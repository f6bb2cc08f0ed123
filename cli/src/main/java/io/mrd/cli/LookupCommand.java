package io.mrd.cli;

import io.mrd.layout.Access;
import io.mrd.layout.ControlFile;
import io.mrd.layout.DeviceDescriptor;
import io.mrd.layout.DeviceTable;
import io.mrd.layout.GlobalCacheReader;
import io.mrd.layout.MrEntry;
import io.mrd.layout.sys.Sizes;
import io.mrd.tools.ControlFileSnapshot;
import io.mrd.tools.Format;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Parameters;

import java.io.PrintWriter;
import java.util.concurrent.Callable;

/**
 * {@code mrd lookup ADDR}: what a secondary gets for an address from the global cache, through the same
 * {@link GlobalCacheReader} it uses.
 */
@Command(
    name = "lookup",
    mixinStandardHelpOptions = true,
    description = {
        "Show what a secondary gets for an address: its MR, range, keys and access.",
        "",
        "Looks the address up in the global MR cache exactly as a secondary does",
        "(seqlock read of the control file; the MR table scan when the cache",
        "overflowed) and print the MR, its chunk, its lkey and rkey (0x0 without",
        "remote access) and its access, or why the address is not registered; on",
        "several devices, then each device's lkey and rkey, as a secondary's cache",
        "of that device gets them. Nothing is created: a worker's first lookup of",
        "an address creates its MR, this command never does."
    },
    footer = {
        "",
        "Examples:",
        "  mrd lookup --dir /tmp/mrd 0x100000201000",
        "    0x100000201000 -> MR 3 [0x100000200000, 0x100000600000) lkey 0x103 rkey 0x0 access local-write",
        "    with --device mlx5_0,mlx5_1, two more lines:",
        "      device 0 mlx5_0       lkey 0x103 rkey 0x0",
        "      device 1 mlx5_1       lkey 0x2a07 rkey 0x0",
        "  mrd lookup --dir /tmp/mrd 0x100000201000 || echo 'not registered yet'",
        "",
        "Exit codes: 0 registered, 1 not registered or no readable control file,",
        "2 bad command line."
    })
public final class LookupCommand implements Callable<Integer>
{
    @Mixin
    ControlFileOption controlFileOption;

    @Parameters(index = "0", paramLabel = "ADDR", converter = SizeConverter.Address.class,
        description = "The address, hex (0x100000200000) or decimal.")
    long address;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    public Integer call()
    {
        final PrintWriter out = spec.commandLine().getOut();
        try (ControlFile ctl = controlFileOption.open())
        {
            final MrEntry entry = new MrEntry();
            final boolean overflow = ctl.header().cacheOverflow();
            final GlobalCacheReader reader = new GlobalCacheReader(ctl);
            if (reader.lookup(address, entry))
            {
                out.println(Sizes.hex(address) + " -> MR " + entry.mr + " " + Format.range(entry.start, entry.end) +
                    " lkey " + Format.key(entry.lkey) + " rkey " + Format.key(entry.rkey) + " access " +
                    Access.describe(entry.access) + (overflow ? " (cache overflowed: found in the MR table)" : ""));
                printDevices(out, ctl, reader, entry);
                out.flush();
                return 0;
            }
            out.println(Sizes.hex(address) + " not registered: " + why(ControlFileSnapshot.read(ctl), address));
            out.flush();
            return Mrd.EXIT_FAILURE;
        }
    }

    /**
     * With several devices, the keys a secondary's cache of each device gets ({@code newCache(device)}): one line
     * per device, each looked up as that cache does, through its row of the MR key table. Each is a read of its
     * own: an MR replaced between two of them is named on the line that found the other.
     */
    private void printDevices(
        final PrintWriter out, final ControlFile ctl, final GlobalCacheReader reader, final MrEntry first)
    {
        final DeviceTable devices = new DeviceTable(ctl.buffer(), ctl.layout());
        final int count = Math.min(devices.count(), DeviceDescriptor.MAX_DEVICES);
        if (count <= 1)
        {
            return;
        }
        final MrEntry entry = new MrEntry();
        for (int device = 0; device < count; device++)
        {
            final String name = String.format("  device %d %-12s", device, devices.name(device));
            if (!reader.lookup(address, entry, device))
            {
                out.println(name + " not registered any more");
                continue;
            }
            if (!Access.isOn(entry.access, device))
            {
                out.println(name + " not placed (access " + Access.describe(entry.access) + "): no MR");
                continue;
            }
            out.println(name + " lkey " + Format.key(entry.lkey) + " rkey " + Format.key(entry.rkey) +
                (entry.mr == first.mr ? "" : " (MR " + entry.mr + ": the MR changed since the line above)"));
        }
    }

    /**
     * @return what the address is, when no MR covers it.
     */
    static String why(final ControlFileSnapshot s, final long address)
    {
        for (final ControlFileSnapshot.MemsegList list : s.lists())
        {
            final int segment = list.segmentOf(address);
            if (segment < 0)
            {
                continue;
            }
            final String where = "segment " + segment + " of list " + list.index();
            if (!list.isAllocated(segment))
            {
                return where + " is free: nothing is allocated there";
            }
            return where + " is allocated to " + Format.owner(s, list.owners()[segment]) +
                " but no MR covers it yet: a worker's first lkey lookup there creates one";
        }
        final long base = s.lists().isEmpty() ? 0 : s.lists().getFirst().baseVa();
        final long end = s.lists().isEmpty() ? 0 : s.lists().getLast().endVa();
        return "outside the memory lists " + Format.range(base, end) + " and every registered external range";
    }
}
