package io.mrd.layout;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import static io.mrd.layout.CacheEntryDescriptor.*;

/**
 * The sorted address→keys table: search and insert over entries laid out by
 * {@link CacheEntryDescriptor}. The global cache in the control file and every
 * bottom-half cache in a secondary are such tables; this is their only search.
 * <p>
 * The search is the reference's: halve {@code n} until one candidate remains,
 * with entry 0 the sentinel (start and end 0) so that no address falls before
 * the first entry and the loop needs no bounds check. It touches
 * {@code log2(len)} entries and always terminates, whatever a concurrent writer
 * left in the table: a seqlock reader may search torn data, and must not loop or
 * read out of bounds while it does.
 */
public final class SortedTable
{
    /** What {@link #lookup} returns when no entry contains the address. */
    public static final int NOT_FOUND = -1;

    private SortedTable()
    {
    }

    /**
     * Finds the last entry whose start is at or below {@code address}.
     *
     * @param buffer  buffer holding the table.
     * @param offset  offset of entry 0 (the sentinel).
     * @param len     entries in use, sentinel included ({@code >= 1}).
     * @param address the address to look up.
     * @return the index of that entry (0, the sentinel, when {@code address} is below every entry).
     */
    public static int search(final DirectBuffer buffer, final int offset, final int len, final long address)
    {
        int base = 0;
        int n = len;
        while (n > 1)
        {
            final int delta = n >>> 1;
            if (address < buffer.getLong(offset + (base + delta) * ENTRY_LENGTH + START_OFFSET))
            {
                n = delta;
            }
            else
            {
                base += delta;
                n -= delta;
            }
        }
        return base;
    }

    /**
     * @return the index of the entry with {@code start <= address < end}, or {@link #NOT_FOUND}.
     */
    public static int lookup(final DirectBuffer buffer, final int offset, final int len, final long address)
    {
        final int index = search(buffer, offset, len, address);
        // index 0 is the sentinel: only an address below every entry (or a negative one) stops there.
        return index > 0 && address < buffer.getLong(offset + index * ENTRY_LENGTH + END_OFFSET) ? index : NOT_FOUND;
    }

    /**
     * Looks {@code address} up and fills {@code out} with the entry holding it: the search and the copy every
     * reader of a table does (the global cache under the seqlock or the cache lock, a local bottom half).
     *
     * @return true when found; {@code out} is untouched otherwise.
     */
    public static boolean find(
        final DirectBuffer buffer, final int offset, final int len, final long address, final MrEntry out)
    {
        final int index = lookup(buffer, offset, len, address);
        if (index == NOT_FOUND)
        {
            return false;
        }
        out.set(start(buffer, offset, index), end(buffer, offset, index), lkey(buffer, offset, index),
            rkey(buffer, offset, index), access(buffer, offset, index), mr(buffer, offset, index));
        return true;
    }

    /**
     * Resets a table to the sentinel alone.
     *
     * @return the new length, 1.
     */
    public static int clear(final MutableDirectBuffer buffer, final int offset)
    {
        putEntry(buffer, offset, 0, 0, 0, NO_LKEY, Access.NO_RKEY, 0, -1);
        return 1;
    }

    /**
     * Inserts an entry, keeping the table sorted. An entry whose start already lies in an entry is not
     * inserted again (the reference does the same).
     *
     * @param len      entries in use before the insert.
     * @param capacity entries the table can hold.
     * @param entry    what to insert; its fields are copied.
     * @return the new length, or {@link #NOT_FOUND} when the table is full (the caller sets overflow).
     */
    public static int insert(
        final MutableDirectBuffer buffer, final int offset, final int len, final int capacity, final MrEntry entry)
    {
        final long start = entry.start;
        final int index = search(buffer, offset, len, start);
        if (index > 0 && start < end(buffer, offset, index))
        {
            return len;
        }
        if (len >= capacity)
        {
            return NOT_FOUND;
        }
        final int slot = index + 1;
        final int shift = (len - slot) * ENTRY_LENGTH;
        if (shift > 0)
        {
            // Overlapping copy: Agrona's putBytes within one buffer is a memmove.
            buffer.putBytes(offset + (slot + 1) * ENTRY_LENGTH, buffer, offset + slot * ENTRY_LENGTH, shift);
        }
        putEntry(buffer, offset, slot, entry.start, entry.end, entry.lkey, entry.rkey, entry.access, entry.mr);
        return len + 1;
    }

    @SuppressWarnings("checkstyle:ParameterNumber")
    public static void putEntry(
        final MutableDirectBuffer buffer,
        final int offset,
        final int index,
        final long start,
        final long end,
        final int lkey,
        final int rkey,
        final int access,
        final int mr)
    {
        final int at = offset + index * ENTRY_LENGTH;
        buffer.putLong(at + START_OFFSET, start);
        buffer.putLong(at + END_OFFSET, end);
        buffer.putInt(at + LKEY_OFFSET, lkey);
        buffer.putInt(at + RKEY_OFFSET, rkey);
        buffer.putInt(at + ACCESS_OFFSET, access);
        buffer.putInt(at + MR_OFFSET, mr);
    }

    public static long start(final DirectBuffer buffer, final int offset, final int index)
    {
        return buffer.getLong(offset + index * ENTRY_LENGTH + START_OFFSET);
    }

    public static long end(final DirectBuffer buffer, final int offset, final int index)
    {
        return buffer.getLong(offset + index * ENTRY_LENGTH + END_OFFSET);
    }

    public static int lkey(final DirectBuffer buffer, final int offset, final int index)
    {
        return buffer.getInt(offset + index * ENTRY_LENGTH + LKEY_OFFSET);
    }

    public static int rkey(final DirectBuffer buffer, final int offset, final int index)
    {
        return buffer.getInt(offset + index * ENTRY_LENGTH + RKEY_OFFSET);
    }

    public static int access(final DirectBuffer buffer, final int offset, final int index)
    {
        return buffer.getInt(offset + index * ENTRY_LENGTH + ACCESS_OFFSET);
    }

    public static int mr(final DirectBuffer buffer, final int offset, final int index)
    {
        return buffer.getInt(offset + index * ENTRY_LENGTH + MR_OFFSET);
    }
}
