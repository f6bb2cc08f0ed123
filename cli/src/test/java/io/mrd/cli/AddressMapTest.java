package io.mrd.cli;

import io.mrd.layout.Access;
import io.mrd.layout.ControlFileLayout;
import io.mrd.layout.HeaderDescriptor;
import io.mrd.layout.MemsegListDescriptor;
import io.mrd.layout.MrDescriptor;
import io.mrd.tools.ControlFileSnapshot;
import io.mrd.tools.DeviceSnapshot;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.BitSet;
import java.util.List;
import java.util.Map;

import static io.mrd.layout.sys.Sizes.MIB;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link AddressMap} on hand-made snapshots: scale of big lists, the state each character shows, line lengths.
 */
final class AddressMapTest
{
    private static final long BASE = 0x1000_0000_0000L;
    private static final long SEGMENT = 2 * MIB;

    @Test
    void scaleIsOneUntilSixteenRowsThenAPowerOfTwo()
    {
        assertEquals(1, AddressMap.scale(16));
        assertEquals(1, AddressMap.scale(1024));
        assertEquals(2, AddressMap.scale(1025));
        assertEquals(8, AddressMap.scale(5000));
        assertEquals(1024, AddressMap.scale(1 << 20));
    }

    @Test
    void bigListIsGroupedAndAGroupShowsItsMostNotableSegment()
    {
        final int segments = 5000;
        final int[] owners = new int[segments];
        final int[] first = new int[segments];
        // Segments 0-15 allocated to client 3; 8-9 registered by MR 0; 100 registered but free (a fault).
        for (int s = 0; s < 16; s++)
        {
            owners[s] = 3;
        }
        final BitSet live = new BitSet();
        live.set(0, 2);
        final BitSet broken = new BitSet();
        broken.set(0);
        final ControlFileSnapshot snapshot = snapshot(segments, owners, first, List.of(
            mr(0, 8, 2, live),
            mr(1, 100, 1, broken)));

        final List<String> lines = AddressMap.render(snapshot);
        lines.forEach(line -> assertTrue(line.length() <= 100, "over 100 chars: " + line));
        assertTrue(lines.contains("  1 char = 8 segments (16MiB, showing the most notable: ! x R a .); row offsets " +
            "from the base"), String.join("\n", lines));
        final String firstRow = lines.stream().filter(l -> l.startsWith("  +0x")).findFirst().orElseThrow();
        // Characters: [0-7] allocated, [8-15] registered, ..., [96-103] broken.
        assertEquals("  +0x000000000  aR...... ....!...", firstRow.substring(0, 33));
        assertEquals(10, lines.stream().filter(l -> l.startsWith("  +0x")).count(), "625 characters in rows of 64");
        assertTrue(lines.contains("  +0x200000000  ........ ........ ........ ........ ........ ........ ........ " +
            "........"), String.join("\n", lines));
    }

    private static ControlFileSnapshot.Mr mr(final int index, final int base, final int spanned, final BitSet bits)
    {
        return new ControlFileSnapshot.Mr(index, MrDescriptor.STATE_ACTIVE, 0x100 + index, 0x100 + index,
            Access.LOCAL_WRITE | Access.REMOTE_READ, 0,
            BASE + base * SEGMENT, BASE + (base + spanned) * SEGMENT, base, bits.cardinality(), spanned, 0, 3, 0, 0,
            MrDescriptor.NO_DEVICE_HANDLE, bits, 0, List.of());
    }

    private static ControlFileSnapshot snapshot(
        final int segments, final int[] owners, final int[] first, final List<ControlFileSnapshot.Mr> mrs)
    {
        int allocated = 0;
        for (final int owner : owners)
        {
            allocated += owner == MemsegListDescriptor.OWNER_FREE ? 0 : 1;
        }
        final ControlFileSnapshot.MemsegList list = new ControlFileSnapshot.MemsegList(0, BASE, SEGMENT, SEGMENT,
            segments, 0, allocated, "/dev/shm/list-0", owners, first, new int[segments]);
        final ControlFileSnapshot.Header header = new ControlFileSnapshot.Header(2, 1, 1, 0, 0, 100, 1000, 0, 0, 0, BASE,
            SEGMENT, 0, 0, "soft", mrs.size(), 0, "", HeaderDescriptor.NO_PD_HANDLE, 0);
        final ControlFileSnapshot.CacheEntry sentinel = new ControlFileSnapshot.CacheEntry(0, 0, 0, -1, 0, 0, -1);
        return new ControlFileSnapshot(Path.of("mrd.ctl"), 0, true, ControlFileLayout.compute(1, segments, 4, 16, 1),
            header, List.of(list), mrs, DeviceSnapshot.NONE, new ControlFileSnapshot.Cache(1, 16, false, sentinel, List.of()), List.of(),
            Map.of());
    }
}
