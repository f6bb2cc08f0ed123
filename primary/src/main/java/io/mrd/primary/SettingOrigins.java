package io.mrd.primary;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.StringJoiner;

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

    private final Map<DaemonSetting<?>, Origin> origins = new HashMap<>();

    void given(final DaemonSetting<?> setting)
    {
        origins.put(setting, Origin.GIVEN);
    }

    void fromEnvironment(final DaemonSetting<?> setting)
    {
        origins.put(setting, Origin.ENVIRONMENT);
    }

    boolean isSet(final DaemonSetting<?> setting)
    {
        return origins.containsKey(setting);
    }

    /**
     * @return where the values of {@code settings} came from and how else they are set, for an error, e.g.
     * " (--max-memory from MRD_MAX_MEMORY)".
     */
    String describe(final DaemonSetting<?>... settings)
    {
        final StringJoiner text = new StringJoiner("; ", " (", ")");
        for (final DaemonSetting<?> setting : settings)
        {
            final Origin origin = origins.get(setting);
            final String name = setting.displayName();
            text.add(null == origin ? name + " by default: give it, or set " + setting.variable() :
                Origin.ENVIRONMENT == origin ? name + " from " + setting.variable() :
                name + " as given, which beats " + setting.variable());
        }
        return text.toString();
    }

    /**
     * @return the variables values were taken from, in the order of the rows.
     */
    List<String> variablesRead()
    {
        return DaemonSettings.all().stream()
            .filter(setting -> Origin.ENVIRONMENT == origins.get(setting))
            .map(DaemonSetting::variable)
            .toList();
    }
}
