package io.mrd.primary.provider;

import java.util.List;

/**
 * A live registration: one range, registered on every device of the provider that its access places it on
 * ({@link io.mrd.layout.Access#isOn}); on the others its MR is {@link DeviceMr#NOT_PLACED}, device 0's fields
 * included.
 *
 * @param address first registered byte.
 * @param length  bytes registered.
 * @param lkey    device 0's local key, as the NIC wants it in a work request.
 * @param rkey    device 0's remote key, {@link io.mrd.layout.Access#NO_RKEY} without remote access.
 * @param handle  the provider's own handle of device 0's MR (the {@code struct ibv_mr *} for ibverbs, an index
 *                for soft).
 * @param deviceHandle device 0's handle of the MR ({@code ibv_mr.handle}, what {@code ibv_import_mr} takes),
 *                     {@link io.mrd.layout.MrDescriptor#NO_DEVICE_HANDLE} for a provider without a device.
 * @param furtherDevices the MRs of the same range on devices 1, 2, …, in device order; empty with one device.
 */
public record Registration(
    long address, long length, int lkey, int rkey, long handle, int deviceHandle, List<DeviceMr> furtherDevices)
{
    public Registration
    {
        furtherDevices = List.copyOf(furtherDevices);
    }

    /**
     * A registration on one device.
     */
    public Registration(
        final long address, final long length, final int lkey, final int rkey, final long handle,
        final int deviceHandle)
    {
        this(address, length, lkey, rkey, handle, deviceHandle, List.of());
    }

    /**
     * @return the provider's handle of the first device's MR that exists: what tells this registration from
     * another while it lives (device 0's handle is 0 when the range is not placed on it).
     */
    public long id()
    {
        for (int device = 0; device < deviceCount(); device++)
        {
            final DeviceMr mr = on(device);
            if (mr.isPlaced())
            {
                return mr.handle();
            }
        }
        throw new IllegalStateException("a registration placed on no device: " + this);
    }

    /**
     * @return the devices of the provider, those the range is registered on and those it is not placed on.
     */
    public int deviceCount()
    {
        return 1 + furtherDevices.size();
    }

    /**
     * @param device a device number, 0 to {@link #deviceCount()} - 1.
     * @return the MR of the range on that device.
     */
    public DeviceMr on(final int device)
    {
        return 0 == device ? new DeviceMr(lkey, rkey, handle, deviceHandle) : furtherDevices.get(device - 1);
    }

    /**
     * One device's MR of a registration.
     *
     * @param lkey         the local key on that device.
     * @param rkey         the remote key on that device ({@link io.mrd.layout.Access#NO_RKEY} without remote
     *                     access).
     * @param handle       the provider's handle of the MR (the {@code struct ibv_mr *}).
     * @param deviceHandle the device's handle of the MR ({@code ibv_mr.handle}).
     */
    public record DeviceMr(int lkey, int rkey, long handle, int deviceHandle)
    {
        /**
         * No MR: the range is not placed on the device. Its keys are what the daemon writes for it (an empty row
         * of the MR key table, the record's keys when it is device 0).
         */
        public static final DeviceMr NOT_PLACED =
            new DeviceMr(0, io.mrd.layout.Access.NO_RKEY, 0, io.mrd.layout.MrDescriptor.NO_DEVICE_HANDLE);

        /** @return false for {@link #NOT_PLACED}. */
        public boolean isPlaced()
        {
            return !NOT_PLACED.equals(this);
        }
    }
}
