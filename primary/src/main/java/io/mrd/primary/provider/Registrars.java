package io.mrd.primary.provider;

import io.mrd.layout.ErrorCode;
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
}
