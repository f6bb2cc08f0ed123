package io.mrd.primary;

import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.StringJoiner;
import java.util.function.Consumer;
import java.util.function.Function;

/**
 * Where each of a {@link DaemonContext}'s values came from: given (a setter, which is the command line), the
 * environment, or nowhere (the default). A setting once given or read stays so, which is what lets an explicit
 * default beat a variable; and an error names where the wrong value came from.
 */
final class SettingOrigins
{
    private enum Origin
    {
        GIVEN, ENVIRONMENT
    }

    private final Map<DaemonSetting, Origin> origins = new EnumMap<>(DaemonSetting.class);

    void given(final DaemonSetting setting)
    {
        origins.put(setting, Origin.GIVEN);
    }

    boolean isSet(final DaemonSetting setting)
    {
        return origins.containsKey(setting);
    }

    boolean isFromEnvironment(final DaemonSetting setting)
    {
        return Origin.ENVIRONMENT == origins.get(setting);
    }

    /**
     * Stores the value of {@code setting}'s variable, unless the setting is set already or the variable is not.
     *
     * @param store the setter, called with the parsed value.
     */
    <T> void fromEnvironment(
        final Map<String, String> env,
        final DaemonSetting setting,
        final Function<String, T> parser,
        final Consumer<T> store)
    {
        final T value = isSet(setting) ? null : setting.fromEnvironment(env, parser);
        if (null != value)
        {
            store.accept(value);
            origins.put(setting, Origin.ENVIRONMENT);
        }
    }

    /**
     * Records that {@code setting} was found in the environment by a rule of its own (the run directory).
     */
    void fromEnvironment(final DaemonSetting setting)
    {
        origins.put(setting, Origin.ENVIRONMENT);
    }

    /**
     * @return where the values of {@code settings} came from and how else they are set, for an error, e.g.
     * " (--max-memory from MRD_MAX_MEMORY)".
     */
    String describe(final DaemonSetting... settings)
    {
        final StringJoiner text = new StringJoiner("; ", " (", ")");
        for (final DaemonSetting setting : settings)
        {
            final Origin origin = origins.get(setting);
            text.add(null == origin ? setting.option() + " by default: give it, or set " + setting.variable() :
                Origin.ENVIRONMENT == origin ? setting.option() + " from " + setting.variable() :
                setting.option() + " as given, which beats " + setting.variable());
        }
        return text.toString();
    }

    /**
     * @return the variables values were taken from.
     */
    List<String> variablesRead()
    {
        return origins.entrySet().stream()
            .filter(e -> Origin.ENVIRONMENT == e.getValue())
            .map(e -> e.getKey().variable())
            .toList();
    }
}
