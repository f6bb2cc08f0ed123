package io.mrd.cli;

import io.mrd.layout.Access;
import io.mrd.layout.MrDescriptor;
import io.mrd.layout.sys.Sizes;
import io.mrd.tools.ControlFileSnapshot;
import io.mrd.tools.Format;

import java.util.ArrayList;
import java.util.List;

/**
 * {@code mrd dump --map}: each memory-segment list's address space as rows of characters, one per segment
 * (or per group of segments in a big list), so that a person sees at a glance what is free, allocated and
 * registered, and where a stale registration still pins memory.
 */
final class AddressMap
{
    static final char FREE = '.';
    static final char ALLOCATED = 'a';
    static final char REGISTERED = 'R';
    static final char STALE = 'x';
    static final char BROKEN = '!';

    /** Characters per row: 8 groups of 8. */
    static final int ROW_CHARS = 64;
    /** Rows a list gets before its segments are grouped. */
    static final int MAX_ROWS = 16;

    static final List<String> LEGEND = List.of(
        "legend:  " + FREE + " free    " + ALLOCATED + " allocated, not registered    " + REGISTERED +
            " registered (a live segment of an ACTIVE MR)",
        "         " + STALE + " allocated under a stale registration (a DETACHED MR awaiting garbage collection,",
        "           or a segment its MR no longer covers)    " + BROKEN +
            " registered but not allocated (run mrd check)");

    /** How notable each state is: a group of segments shows its most notable one. */
    private static final String RANK = "" + FREE + ALLOCATED + REGISTERED + STALE + BROKEN;

    private AddressMap()
    {
    }

    /**
     * @return the lines of the map: legend, then each list, then the external MRs.
     */
    static List<String> render(final ControlFileSnapshot snapshot)
    {
        final List<String> lines = new ArrayList<>(LEGEND);
        for (final ControlFileSnapshot.MemsegList list : snapshot.lists())
        {
            lines.add("");
            renderList(snapshot, list, lines);
        }
        final List<ControlFileSnapshot.Mr> externals = snapshot.mrs().stream()
            .filter(ControlFileSnapshot.Mr::external).toList();
        lines.add("");
        if (externals.isEmpty())
        {
            lines.add("external memory: none registered");
        }
        else
        {
            lines.add("external memory (no segments; one MR each):");
            for (final ControlFileSnapshot.Mr mr : externals)
            {
                lines.add("  " + (mr.active() ? REGISTERED : STALE) + " MR " + mr.index() + " " +
                    Format.range(mr.start(), mr.end()) + " " + Format.size(mr.length()) + " " + mr.stateName() +
                    " lkey " + Format.key(mr.lkey()) + " rkey " + Format.key(mr.rkey()) + " " +
                    Access.describe(mr.access()));
            }
        }
        return lines;
    }

    /**
     * @return one character per segment of the list.
     */
    static char[] segmentStates(final ControlFileSnapshot snapshot, final ControlFileSnapshot.MemsegList list)
    {
        final int count = list.segmentCount();
        final char[] states = new char[count];
        for (int s = 0; s < count; s++)
        {
            states[s] = list.isAllocated(s) ? ALLOCATED : FREE;
        }
        // Live segments first, so that a segment another MR registered is not shown as stale.
        for (final ControlFileSnapshot.Mr mr : snapshot.mrs())
        {
            if (mr.active() && !mr.external() && mr.listIndex() == list.index())
            {
                for (int b = mr.bits().nextSetBit(0); b >= 0; b = mr.bits().nextSetBit(b + 1))
                {
                    final long s = (long)mr.msBaseIdx() + b;
                    if (s >= 0 && s < count)
                    {
                        states[(int)s] = list.isAllocated((int)s) ? REGISTERED : BROKEN;
                    }
                }
            }
        }
        // A registration covers its MR's whole range [start, end), live bits or not, until it is collected.
        for (final ControlFileSnapshot.Mr mr : snapshot.mrs())
        {
            if (mr.external() || mr.listIndex() != list.index() ||
                (mr.state() != MrDescriptor.STATE_ACTIVE && mr.state() != MrDescriptor.STATE_DETACHED))
            {
                continue;
            }
            final long from = Math.max(0, mr.msBaseIdx());
            final long to = Math.min(count, (long)mr.msBaseIdx() + Math.max(0, mr.msBmpN()));
            for (long s = from; s < to; s++)
            {
                if (states[(int)s] == ALLOCATED)
                {
                    states[(int)s] = STALE;
                }
            }
        }
        return states;
    }

    /**
     * @return segments per character: 1 while the list fits in {@link #MAX_ROWS} rows, else a power of two.
     */
    static int scale(final int segmentCount)
    {
        final int perChar = (segmentCount + ROW_CHARS * MAX_ROWS - 1) / (ROW_CHARS * MAX_ROWS);
        return perChar <= 1 ? 1 : Integer.highestOneBit(perChar - 1) << 1;
    }

    private static void renderList(
        final ControlFileSnapshot snapshot, final ControlFileSnapshot.MemsegList list, final List<String> lines)
    {
        final char[] states = segmentStates(snapshot, list);
        final int scale = scale(list.segmentCount());
        final long charBytes = scale * list.segmentSize();
        int allocated = 0;
        int registered = 0;
        for (final char c : states)
        {
            allocated += c == FREE ? 0 : 1;
            registered += c == REGISTERED ? 1 : 0;
        }
        lines.add("list " + list.index() + "  base " + Sizes.hex(list.baseVa()) + "  " + list.segmentCount() +
            " segments of " + Sizes.format(list.segmentSize()) + ", " + allocated + " allocated, " + registered +
            " registered");
        lines.add(scale == 1 ?
            "  1 char = 1 segment (" + Sizes.format(charBytes) + "); row offsets from the base" :
            "  1 char = " + scale + " segments (" + Sizes.format(charBytes) +
                ", showing the most notable: ! x R a .); row offsets from the base");
        final int chars = (list.segmentCount() + scale - 1) / scale;
        final int offsetDigits = Math.max(1, Long.toHexString(Math.max(1, (long)chars * charBytes)).length());
        for (int row = 0; row * ROW_CHARS < chars; row++)
        {
            final StringBuilder line = new StringBuilder(100);
            final String offset = Long.toHexString((long)row * ROW_CHARS * charBytes);
            line.append("  +0x").append("0".repeat(Math.max(0, offsetDigits - offset.length()))).append(offset).append("  ");
            for (int c = row * ROW_CHARS; c < Math.min(chars, (row + 1) * ROW_CHARS); c++)
            {
                if (c > row * ROW_CHARS && c % 8 == 0)
                {
                    line.append(' ');
                }
                line.append(groupState(states, c * scale, Math.min(states.length, (c + 1) * scale)));
            }
            lines.add(line.toString());
        }
    }

    private static char groupState(final char[] states, final int from, final int to)
    {
        char best = FREE;
        for (int s = from; s < to; s++)
        {
            if (RANK.indexOf(states[s]) > RANK.indexOf(best))
            {
                best = states[s];
            }
        }
        return best;
    }
}
