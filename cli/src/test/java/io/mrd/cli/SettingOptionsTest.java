package io.mrd.cli;

import io.mrd.primary.DaemonSetting;
import io.mrd.primary.DaemonSettings;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import picocli.CommandLine;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Model.OptionSpec;

import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code mrd start}'s options are the rows of {@link DaemonSettings}: one option a row that has one, made from the
 * row (its parameter, help, visibility, a flag's {@code --no-} form), no setting option that is not a row's, and
 * a footer that names every variable that is not the option's name in capitals and every variable without an
 * option.
 */
final class SettingOptionsTest
{
    /** The options of {@code mrd start} that are no setting. */
    private static final Set<String> COMMANDS_OWN = Set.of("--foreground", "--log-level", "--take-over",
        "--take-over-timeout", "--help", "--version");

    static List<DaemonSetting<?>> settingsWithAnOption()
    {
        return DaemonSettings.all().stream().filter(setting -> null != setting.option()).toList();
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("settingsWithAnOption")
    void theOptionIsMadeFromItsRow(final DaemonSetting<?> setting)
    {
        final OptionSpec option = start().findOption(setting.option());
        assertNotNull(option, setting.option());
        assertEquals(setting.help(), String.join(" ", option.description()));
        assertEquals(setting.hidden(), option.hidden());
        assertEquals(setting.type().isFlag(), option.negatable());
        if (!setting.type().isFlag())
        {
            assertEquals(setting.paramLabel(), option.paramLabel());
        }
        assertEquals(null != setting.type().element(), option.isMultiValue(), "a list is repeatable");
    }

    @Test
    void everyOptionButTheCommandsOwnIsARowsOption()
    {
        final Set<String> options = start().options().stream().map(OptionSpec::longestName)
            .filter(name -> !COMMANDS_OWN.contains(name)).collect(Collectors.toSet());
        assertEquals(settingsWithAnOption().stream().map(DaemonSetting::option).collect(Collectors.toSet()), options);
    }

    @Test
    void theFooterNamesTheVariablesThatAreNotTheOptionInCapitalsAndThoseWithoutOne()
    {
        final String help = usage();
        assertTrue(help.contains("Every option but --foreground, --log-level, --take-over and " +
            "--take-over-timeout can also be given by a variable"),
            help);
        for (final DaemonSetting<?> setting : DaemonSettings.all())
        {
            if (null == setting.option())
            {
                assertTrue(help.contains(setting.variable() + " " + setting.help()), setting.variable());
            }
            else if (!setting.variableFollowsOption())
            {
                assertTrue(help.contains(setting.variable() + " for " + setting.option()), setting.variable());
            }
        }
        assertTrue(help.contains("but MRD_HEARTBEAT_INTERVAL_MS for --heartbeat-interval."), help);
    }

    @Test
    void aTextThatIsNoValueIsRefusedAsPicocliRefusesAnyNamingTheOption()
    {
        final CommandLine.ParameterException ex = assertThrows(CommandLine.ParameterException.class,
            () -> Mrd.commandLine().parseArgs("start", "--max-mrs", "many"));
        assertEquals("Invalid value for option '--max-mrs': 'many' is not a number", ex.getMessage());
        final CommandLine.ParameterException gid = assertThrows(CommandLine.ParameterException.class,
            () -> Mrd.commandLine().parseArgs("start", "--allow-gid", "7,wheel"));
        assertEquals("Invalid value for option '--allow-gid' (GID): 'wheel' is not a group id, or several " +
            "separated by commas", gid.getMessage());
    }

    private static CommandSpec start()
    {
        return Mrd.commandLine().getSubcommands().get("start").getCommandSpec();
    }

    private static String usage()
    {
        return Mrd.commandLine().getSubcommands().get("start").getUsageMessage().replaceAll("\\s+", " ");
    }
}
