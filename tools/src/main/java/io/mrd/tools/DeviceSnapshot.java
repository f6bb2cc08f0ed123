package io.mrd.tools;

import io.mrd.layout.ControlFileLayout;
import io.mrd.layout.DeviceDescriptor;
import io.mrd.layout.DeviceTable;
import org.agrona.concurrent.UnsafeBuffer;

import java.util.ArrayList;
import java.util.BitSet;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The device table and the MR key table ({@link DeviceDescriptor}) as {@link ControlFileSnapshot#read} copies them,
 * in the same read section as the MR records whose keys they hold: what {@code mrd dump} prints per device and
 * {@link DeviceInvariants} checks.
 * <p>
 * Column 0 of a row is written for every provider, the soft one included (its keys, with no device handle): the
 * daemon writes one entry per device of the registration, and a soft registration has one. So the columns in use
 * are {@link #keyColumns()}, never fewer than one, while {@link #devices} is empty without a device.
 *
 * @param count   the header's device count as read ({@code DeviceTable.count()}): 0 without a device; a corrupt
 *                file may give any value, so only the first {@code min(count, MAX_DEVICES)} records are read.
 * @param devices the device records in use, device 0 first.
 * @param rows    by MR record index, every row read ({@link #read}) that is not empty, all
 *                {@link DeviceDescriptor#MAX_DEVICES} columns of it: those of the records in use, and any left
 *                behind by a FREE record (which is a fault: freeing a record clears its row).
 */
public record DeviceSnapshot(int count, List<Device> devices, Map<Integer, List<Keys>> rows)
{
    /** No device and no keys: a file without a device or an MR (snapshots built by hand). */
    public static final DeviceSnapshot NONE = new DeviceSnapshot(0, List.of(), Map.of());

    private static final List<Keys> EMPTY_ROW = Collections.nCopies(DeviceDescriptor.MAX_DEVICES, Keys.EMPTY);

    /**
     * One device record.
     *
     * @param number its place in {@code --device}, 0 first.
     * @param name   its name, as {@code ibv_get_device_name} gave it.
     */
    public record Device(int number, String name, int pdHandle)
    {
    }

    /**
     * One entry of the MR key table: an MR's keys on one device.
     *
     * @param rkey         {@link io.mrd.layout.Access#NO_RKEY} without remote access.
     * @param deviceHandle the device's handle of the MR ({@code ibv_mr.handle}), -1 for the soft provider's.
     */
    public record Keys(int lkey, int rkey, int deviceHandle)
    {
        /** An entry as the daemon clears it (the file's zeros): never written, or cleared with its record. */
        public static final Keys EMPTY = new Keys(0, 0, 0);

        /**
         * @return true when the entry is as cleared. A real MR is told from it by its keys and handle together:
         * no device gives one MR the lkey 0, the rkey 0 and the handle 0 at once.
         */
        public boolean isEmpty()
        {
            return EMPTY.equals(this);
        }
    }

    /**
     * @return the key columns the daemon writes: one per device, and one for a provider without a device.
     */
    public int keyColumns()
    {
        return Math.max(1, devices.size());
    }

    /**
     * @return true when the daemon registers on more than one device: what makes the tools show keys per device.
     */
    public boolean several()
    {
        return devices.size() > 1;
    }

    /**
     * @return MR record {@code mr}'s row, all {@link DeviceDescriptor#MAX_DEVICES} columns ({@link Keys#EMPTY}
     * where nothing is written).
     */
    public List<Keys> row(final int mr)
    {
        return rows.getOrDefault(mr, EMPTY_ROW);
    }

    /**
     * @return MR record {@code mr}'s keys on device {@code device}.
     */
    public Keys keys(final int mr, final int device)
    {
        return row(mr).get(device);
    }

    /**
     * Reads the device records and the rows of the MR key table that can hold keys; called inside the snapshot's
     * read section.
     * <p>
     * The rows read are those of the records in use and of every slot below the high-water mark: the daemon
     * writes rows only there, so a row left behind by a freed record is below it. Rows above it are not read, so
     * that a dump of a file with a large {@code --max-mrs} does not fault in the key table's untouched pages.
     *
     * @param highWater the header's MR high-water mark, as read.
     * @param inUse     the indices of the records that are not FREE.
     */
    static DeviceSnapshot read(
        final UnsafeBuffer buffer, final ControlFileLayout layout, final int highWater, final BitSet inUse)
    {
        final DeviceTable table = new DeviceTable(buffer, layout);
        final int count = table.count();
        final List<Device> devices = new ArrayList<>();
        for (int d = 0; d < Math.min(Math.max(count, 0), DeviceDescriptor.MAX_DEVICES); d++)
        {
            devices.add(new Device(d, table.name(d), table.pdHandle(d)));
        }
        final Map<Integer, List<Keys>> rows = new TreeMap<>();
        final BitSet toRead = (BitSet)inUse.clone();
        toRead.set(0, Math.max(0, Math.min(highWater, layout.mrCapacity())));
        for (int mr = toRead.nextSetBit(0); mr >= 0 && mr < layout.mrCapacity(); mr = toRead.nextSetBit(mr + 1))
        {
            final Keys[] row = new Keys[DeviceDescriptor.MAX_DEVICES];
            boolean written = false;
            for (int d = 0; d < row.length; d++)
            {
                row[d] = new Keys(table.lkey(mr, d), table.rkey(mr, d), table.deviceHandle(mr, d));
                written |= !row[d].isEmpty();
            }
            if (written)
            {
                rows.put(mr, List.of(row));
            }
        }
        return new DeviceSnapshot(count, List.copyOf(devices), Collections.unmodifiableMap(rows));
    }
}
