package io.mrd.layout;

import org.agrona.MutableDirectBuffer;

import static io.mrd.layout.DeviceDescriptor.*;

/**
 * Flyweight over the device table and the MR key table ({@link DeviceDescriptor}): the devices a daemon
 * registers on, and each MR record's keys on each of them. The daemon writes a row inside the write section that
 * publishes its MR record; readers read it inside a read section of the seqlock, as they read the record.
 */
public final class DeviceTable
{
    private final MutableDirectBuffer buffer;
    private final ControlFileLayout layout;

    /**
     * @param buffer the whole control file.
     * @param layout its layout, as the header gives it.
     */
    public DeviceTable(final MutableDirectBuffer buffer, final ControlFileLayout layout)
    {
        this.buffer = buffer;
        this.layout = layout;
    }

    /**
     * @return the devices the daemon registers on, as the header counts them (0 without a device).
     */
    public int count()
    {
        return buffer.getInt(HeaderDescriptor.DEVICE_COUNT_OFFSET);
    }

    /**
     * @return device {@code device}'s name, as {@code ibv_get_device_name} gave it.
     */
    public String name(final int device)
    {
        return AsciiField.get(buffer, layout.deviceOffset(device) + NAME_OFFSET, NAME_LENGTH);
    }

    /**
     * @return device {@code device}'s PD handle ({@code ibv_pd.handle}).
     */
    public int pdHandle(final int device)
    {
        return buffer.getInt(layout.deviceOffset(device) + PD_HANDLE_OFFSET);
    }

    /**
     * Records one device; the daemon does it for each, in order, before it publishes the layout version.
     */
    public DeviceTable device(final int device, final String name, final int pdHandle)
    {
        checkDevice(device);
        AsciiField.put(buffer, layout.deviceOffset(device) + NAME_OFFSET, NAME_LENGTH, name);
        buffer.putInt(layout.deviceOffset(device) + PD_HANDLE_OFFSET, pdHandle);
        return this;
    }

    /**
     * @return MR record {@code mr}'s local key on device {@code device}.
     */
    public int lkey(final int mr, final int device)
    {
        return buffer.getInt(layout.mrKeyOffset(mr, device) + LKEY_OFFSET);
    }

    /**
     * @return MR record {@code mr}'s remote key on device {@code device} ({@link Access#NO_RKEY} without remote
     * access).
     */
    public int rkey(final int mr, final int device)
    {
        return buffer.getInt(layout.mrKeyOffset(mr, device) + RKEY_OFFSET);
    }

    /**
     * @return the device's handle of MR record {@code mr}'s MR on device {@code device} ({@code ibv_mr.handle}).
     */
    public int deviceHandle(final int mr, final int device)
    {
        return buffer.getInt(layout.mrKeyOffset(mr, device) + DEVICE_HANDLE_OFFSET);
    }

    /**
     * Writes MR record {@code mr}'s keys on device {@code device}. Caller holds the write section.
     */
    public DeviceTable keys(final int mr, final int device, final int lkey, final int rkey, final int deviceHandle)
    {
        checkDevice(device);
        final int at = layout.mrKeyOffset(mr, device);
        buffer.putInt(at + LKEY_OFFSET, lkey);
        buffer.putInt(at + RKEY_OFFSET, rkey);
        buffer.putInt(at + DEVICE_HANDLE_OFFSET, deviceHandle);
        return this;
    }

    /**
     * Clears MR record {@code mr}'s row, as its record is freed. Caller holds the write section.
     */
    public DeviceTable clear(final int mr)
    {
        buffer.setMemory(layout.mrKeyOffset(mr, 0), KEY_ROW_LENGTH, (byte)0);
        return this;
    }

    private static void checkDevice(final int device)
    {
        if (device < 0 || device >= MAX_DEVICES)
        {
            throw new IndexOutOfBoundsException("device " + device + " is not 0 to " + (MAX_DEVICES - 1));
        }
    }
}
