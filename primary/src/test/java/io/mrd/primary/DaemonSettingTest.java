package io.mrd.primary;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.RunDirectoryPath;
import io.mrd.primary.provider.ProviderConfig;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import java.util.List;
import java.util.Objects;
import java.util.function.Function;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * What every row of {@link DaemonSettings} must be, so that a new setting is its row and nothing more: a name, an
 * option and a variable of its own, a help text with its default written in, a default its own check takes and
 * that {@code --help} writes as the option reads it.
 */
final class DaemonSettingTest
{
    static List<DaemonSetting<?>> rows()
    {
        return DaemonSettings.all();
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("rows")
    void theRowIsComplete(final DaemonSetting<?> setting)
    {
        assertFalse(setting.name().isBlank());
        assertTrue(setting.variable().startsWith("MRD_"), setting.variable());
        assertFalse(setting.help().isBlank());
        assertFalse(setting.help().contains("${"), "the default is written in: " + setting.help());
        if (null == setting.option())
        {
            assertFalse(setting.hidden(), "a variable without an option is in the help's footer");
        }
        else
        {
            assertTrue(setting.option().startsWith("--"), setting.option());
            assertEquals(setting.type().isFlag(), null == setting.paramLabel(), "a parameter unless a flag");
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("rows")
    void theDefaultPassesItsOwnCheck(final DaemonSetting<?> setting)
    {
        assertNull(refusalOfDefault(setting));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("rows")
    void theDefaultAsHelpWritesItIsWhatTheOptionReads(final DaemonSetting<?> setting)
    {
        if (setting.defaultIsNone())
        {
            return; // "none given" is no text an option takes: the help says it in words ("default: off")
        }
        assertEquals(setting.defaultValue(), setting.parse(formattedDefault(setting)));
    }

    @Test
    void everyNameOptionAndVariableIsOneSettingsOnly()
    {
        for (final Function<DaemonSetting<?>, String> key : List.<Function<DaemonSetting<?>, String>>of(
            DaemonSetting::name, DaemonSetting::option, DaemonSetting::variable))
        {
            final List<String> keys = rows().stream().map(key).filter(Objects::nonNull).toList();
            assertEquals(keys.size(), keys.stream().distinct().count(), keys.toString());
        }
    }

    @Test
    void theVariableIsTheOptionInCapitalsUnlessTheRowNamesAnother()
    {
        assertEquals("MRD_MAX_MEMORY", DaemonSettings.MAX_MEMORY.variable());
        assertTrue(DaemonSettings.MAX_MEMORY.variableFollowsOption());
        assertEquals(RunDirectoryPath.MRD_DIR, DaemonSettings.DIR.variable());
        assertEquals("MRD_HEARTBEAT_INTERVAL_MS", DaemonSettings.HEARTBEAT_INTERVAL.variable());
        assertFalse(DaemonSettings.HEARTBEAT_INTERVAL.variableFollowsOption());
        assertEquals(ProviderConfig.LIBRARY_ENV, DaemonSettings.IBVERBS_LIBRARY.variable());
        assertNull(DaemonSettings.IBVERBS_LIBRARY.option());
    }

    @Test
    void aTextThatIsNoValueIsRefusedWithTheRowsPhraseOrThePartsOwn()
    {
        final MrdException metrics = assertThrows(MrdException.class, () -> DaemonSettings.METRICS.parse("localhost"));
        assertEquals(ErrorCode.EINVAL, metrics.code());
        assertEquals("'localhost' is not HOST:PORT with a host that resolves and a port of 0 to 65535 " +
            "(e.g. 127.0.0.1:9464 or :9464)", metrics.getMessage());
        assertEquals("'' is not a device name, a comma-separated list of names, or all",
            assertThrows(MrdException.class, () -> DaemonSettings.DEVICE.parse("")).getMessage());
        assertEquals("'abc' is not a group id, or several separated by commas",
            assertThrows(MrdException.class, () -> DaemonSettings.ALLOW_GID.parseElement("abc")).getMessage());
        // A size says itself what is wrong with it.
        assertEquals("size '99999999999TiB' does not fit in 64 bits",
            assertThrows(MrdException.class, () -> DaemonSettings.MAX_MEMORY.parse("99999999999TiB")).getMessage());
        assertEquals(List.of(1, 2), DaemonSettings.ALLOW_GID.parse("1, 2"));
    }

    @Test
    void theHelpWritesTheDefaultAsTheOptionTakesIt()
    {
        assertTrue(DaemonSettings.MAX_MEMORY.help().endsWith("(default: 2GiB)."), DaemonSettings.MAX_MEMORY.help());
        assertTrue(DaemonSettings.MAX_PINNED.help().contains("(default: 0, no mrd limit"));
        assertTrue(DaemonSettings.BASE_VIRTADDR.help().contains("(default: 0x100000000000)"));
        assertNotNull(DaemonSettings.JOURNAL_SIZE.parse("off"));
    }

    private static <T> String refusalOfDefault(final DaemonSetting<T> setting)
    {
        return setting.refusal(setting.defaultValue());
    }

    private static <T> String formattedDefault(final DaemonSetting<T> setting)
    {
        return setting.type().format(setting.defaultValue());
    }
}
