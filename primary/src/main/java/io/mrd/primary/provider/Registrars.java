package io.mrd.primary.provider;

import io.mrd.layout.ControlHeader;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.HeaderDescriptor;
import io.mrd.layout.MrdException;

import java.util.List;
import java.util.Optional;

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
     * Records in the control file's header the device and PD the provider's MRs belong to (none for a provider
     * without a device): what a successor imports them by, and what {@code mrd check} holds each MR's device
     * handle to.
     */
    public static void recordDevice(final ControlHeader header, final Registrar registrar)
    {
        final Optional<SharedDevice> device = registrar.sharedDevice();
        header.pdHandle(device.map(SharedDevice::pdHandle).orElse(HeaderDescriptor.NO_PD_HANDLE))
            .deviceName(device.map(SharedDevice::deviceName).orElse(""));
    }
}
