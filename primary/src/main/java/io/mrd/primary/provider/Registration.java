package io.mrd.primary.provider;

import java.util.List;

/**
 * A live registration: one range, registered on every device of the provider.
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
     * @return the devices the range is registered on.
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
    }
}
