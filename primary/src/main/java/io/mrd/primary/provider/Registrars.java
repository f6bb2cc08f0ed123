package io.mrd.primary.provider;

import io.mrd.layout.ControlFile;
import io.mrd.layout.ControlHeader;
import io.mrd.layout.DeviceTable;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.HeaderDescriptor;
import io.mrd.layout.MrdException;

import java.util.List;

/**
 * Builds the provider {@code --provider} names. Whatever keeps a provider from working (no libibverbs, no
 * device, a device name that does not exist) surfaces here, at start, as one {@link MrdException} whose
 * {@link MrdException#oneLine()} says what is missing.
 */
public final class Registrars
{
    /** The names {@code --provider} accepts, default first. */
    public static final List<String> NAMES = List.of(ProviderConfig.SOFT, ProviderConfig.IBVERBS);

    private Registrars()
    {
    }

    /**
     * @param config the provider's settings.
     * @return a ready provider, owned by the caller (close it).
     * @throws MrdException EINVAL for an unknown provider name, listing the known ones; the provider's own
     *                      start failure otherwise.
     */
    public static Registrar create(final ProviderConfig config)
    {
        return switch (config.name())
        {
            case ProviderConfig.SOFT -> new SoftRegistrar(config);
            case ProviderConfig.IBVERBS -> new IbverbsRegistrar(config);
            default -> throw new MrdException(ErrorCode.EINVAL,
                "unknown provider '" + config.name() + "': --provider takes one of " + String.join(", ", NAMES));
        };
    }

    /**
     * Records in the control file the devices and PDs the provider's MRs belong to (none for a provider without
     * a device): the count and device 0 in the header, every device in the device table. What a successor
     * imports them by, and what {@code mrd check} holds each MR's device handle to.
     */
    public static void recordDevices(final ControlFile controlFile, final Registrar registrar)
    {
        final List<SharedDevice> devices = registrar.sharedDevices();
        final ControlHeader header = controlFile.header();
        header.deviceCount(devices.size())
            .pdHandle(devices.isEmpty() ? HeaderDescriptor.NO_PD_HANDLE : devices.getFirst().pdHandle())
            .deviceName(devices.isEmpty() ? "" : devices.getFirst().deviceName());
        final DeviceTable table = new DeviceTable(controlFile.buffer(), controlFile.layout());
        for (int device = 0; device < devices.size(); device++)
        {
            table.device(device, devices.get(device).deviceName(), devices.get(device).pdHandle());
        }
    }
}
