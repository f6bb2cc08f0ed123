package io.mrd.primary.provider;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;

/**
 * What {@code --device} takes: one device name, a comma-separated list of names, or
 * {@value ProviderConfig#ALL_DEVICES}. Devices are numbered by their place in the list (device 0 first): the
 * number every key of a registration is filed under.
 */
public final class DeviceSelection
{
    private DeviceSelection()
    {
    }

    /**
     * @param value the {@code --device} value; empty for the first device libibverbs lists.
     * @return the names in order; empty when unset; {@code [all]} for every device.
     * @throws MrdException EINVAL for an empty name, a name given twice, {@value ProviderConfig#ALL_DEVICES}
     *                      beside names, or more than {@value ProviderConfig#MAX_DEVICES} names.
     */
    public static List<String> names(final Optional<String> value)
    {
        if (value.isEmpty())
        {
            return List.of();
        }
        final String text = value.get().strip();
        final Set<String> names = new LinkedHashSet<>();
        for (final String part : text.split(",", -1))
        {
            final String name = part.strip();
            if (name.isEmpty())
            {
                throw invalid(text, "an empty device name");
            }
            if (!names.add(name))
            {
                throw invalid(text, "device " + name + " twice (each device gets one PD and one set of keys)");
            }
        }
        if (names.contains(ProviderConfig.ALL_DEVICES) && names.size() > 1)
        {
            throw invalid(text, "'" + ProviderConfig.ALL_DEVICES + "' beside device names");
        }
        checkCount(names.size(), "'" + text + "'");
        return List.copyOf(new ArrayList<>(names));
    }

    /**
     * @return null when {@code value} is a valid {@code --device}, else what is wrong with it.
     */
    public static String problem(final String value)
    {
        try
        {
            names(Optional.of(value));
            return null;
        }
        catch (final MrdException ex)
        {
            return ex.getMessage();
        }
    }

    static boolean isAll(final List<String> names)
    {
        return names.equals(List.of(ProviderConfig.ALL_DEVICES));
    }

    static void checkCount(final int count, final String what)
    {
        if (count > ProviderConfig.MAX_DEVICES)
        {
            throw new MrdException(ErrorCode.EINVAL, "--device " + what + " names " + count + " devices, more " +
                "than the " + ProviderConfig.MAX_DEVICES + " one daemon registers on: name at most " +
                ProviderConfig.MAX_DEVICES + ", those local to the memory's NUMA node first");
        }
    }

    private static MrdException invalid(final String text, final String what)
    {
        return new MrdException(ErrorCode.EINVAL, "--device '" + text + "' has " + what + ": give one device " +
            "name, a comma-separated list of names (e.g. mlx5_0,mlx5_1) or '" + ProviderConfig.ALL_DEVICES + "'");
    }
}
