package io.mrd.primary.provider;

/**
 * A live registration.
 *
 * @param address first registered byte.
 * @param length  bytes registered.
 * @param lkey    local key, as the NIC wants it in a work request.
 * @param rkey    remote key, {@link io.mrd.layout.Access#NO_RKEY} without remote access.
 * @param handle  the provider's own handle (the {@code struct ibv_mr *} for ibverbs, an index for soft).
 * @param deviceHandle the device's handle of the MR ({@code ibv_mr.handle}, what {@code ibv_import_mr} takes),
 *                     {@link io.mrd.layout.MrDescriptor#NO_DEVICE_HANDLE} for a provider without a device.
 */
public record Registration(long address, long length, int lkey, int rkey, long handle, int deviceHandle)
{
}
