package io.mrd.cli;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.primary.DaemonContext;
import io.mrd.primary.DaemonSetting;
import io.mrd.primary.DaemonSettings;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import picocli.CommandLine;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

import static io.mrd.layout.sys.Sizes.GIB;
import static io.mrd.layout.sys.Sizes.MIB;
import static io.mrd.primary.DaemonSettings.ALLOW_GID;
import static io.mrd.primary.DaemonSettings.BASE_VIRTADDR;
import static io.mrd.primary.DaemonSettings.CACHE_CAPACITY;
import static io.mrd.primary.DaemonSettings.DEVICE;
import static io.mrd.primary.DaemonSettings.DIR;
import static io.mrd.primary.DaemonSettings.FAIL_NTH;
import static io.mrd.primary.DaemonSettings.HEARTBEAT_INTERVAL;
import static io.mrd.primary.DaemonSettings.JOURNAL_SIZE;
import static io.mrd.primary.DaemonSettings.LIST_SIZE;
import static io.mrd.primary.DaemonSettings.MAX_CLIENTS;
import static io.mrd.primary.DaemonSettings.MAX_EXTERNAL;
import static io.mrd.primary.DaemonSettings.MAX_MEMORY;
import static io.mrd.primary.DaemonSettings.MAX_MRS;
import static io.mrd.primary.DaemonSettings.MAX_PINNED;
import static io.mrd.primary.DaemonSettings.METRICS;
import static io.mrd.primary.DaemonSettings.MR_EXT_MEMSEG;
import static io.mrd.primary.DaemonSettings.POPULATE_THREADS;
import static io.mrd.primary.DaemonSettings.PROVIDER;
import static io.mrd.primary.DaemonSettings.REGISTRATION_LATENCY;
import static io.mrd.primary.DaemonSettings.WORKER_THREADS;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code mrd start}'s options reach the daemon's context only when given, so that an option beats its variable
 * even when it repeats the default (picocli fills the fields of the others with the defaults {@code --help}
 * prints), and a variable beats the default.
 */
final class StartCommandContextTest
{
    /**
     * @param option  the option and its value on the command line.
     * @param env     the variable of the same setting, with another value.
     * @param flag    the value the option gives.
     * @param fromEnv the value the variable gives.
     * @param value   the setting in the context.
     */
    record Row(List<String> option, Map<String, String> env, Object flag, Object fromEnv, Object byDefault,
        Function<DaemonContext, Object> value)
    {
        public String toString()
        {
            return String.join(" ", option);
        }
    }

    static List<Row> rows()
    {
        return List.of(
            new Row(List.of("--max-memory", "2GiB"), Map.of("MRD_MAX_MEMORY", "4GiB"), 2 * GIB, 4 * GIB,
                MAX_MEMORY.defaultValue(), c -> c.get(MAX_MEMORY)),
            new Row(List.of("--base-virtaddr", "0x100000000000"), Map.of("MRD_BASE_VIRTADDR", "0x200000000000"),
                0x1000_0000_0000L, 0x2000_0000_0000L, BASE_VIRTADDR.defaultValue(), c -> c.get(BASE_VIRTADDR)),
            new Row(List.of("--list-size", "512MiB"), Map.of("MRD_LIST_SIZE", "256MiB"), 512 * MIB, 256 * MIB,
                LIST_SIZE.defaultValue(), c -> c.get(LIST_SIZE)),
            new Row(List.of("--max-external", "1GiB"), Map.of("MRD_MAX_EXTERNAL", "2GiB"), GIB, 2 * GIB,
                MAX_EXTERNAL.defaultValue(), c -> c.get(MAX_EXTERNAL)),
            new Row(List.of("--max-mrs", "4096"), Map.of("MRD_MAX_MRS", "100"), 4096, 100,
                MAX_MRS.defaultValue(), c -> c.get(MAX_MRS)),
            new Row(List.of("--cache-capacity", "1048576"), Map.of("MRD_CACHE_CAPACITY", "1000"), 1 << 20, 1000,
                CACHE_CAPACITY.defaultValue(), c -> c.get(CACHE_CAPACITY)),
            new Row(List.of("--max-clients", "256"), Map.of("MRD_MAX_CLIENTS", "8"), 256, 8,
                MAX_CLIENTS.defaultValue(), c -> c.get(MAX_CLIENTS)),
            new Row(List.of("--worker-threads", "4"), Map.of("MRD_WORKER_THREADS", "2"), 4, 2,
                WORKER_THREADS.defaultValue(), c -> c.get(WORKER_THREADS)),
            new Row(List.of("--populate-threads", "1"), Map.of("MRD_POPULATE_THREADS", "3"), 1, 3,
                POPULATE_THREADS.defaultValue(), c -> c.get(POPULATE_THREADS)),
            new Row(List.of("--heartbeat-interval", "100"), Map.of("MRD_HEARTBEAT_INTERVAL_MS", "300"), 100, 300,
                100, c -> c.get(HEARTBEAT_INTERVAL)),
            new Row(List.of("--mr-ext-memseg"), Map.of("MRD_MR_EXT_MEMSEG", "false"), true, false, true,
                c -> c.get(MR_EXT_MEMSEG)),
            new Row(List.of("--no-mr-ext-memseg"), Map.of("MRD_MR_EXT_MEMSEG", "true"), false, true, true,
                c -> c.get(MR_EXT_MEMSEG)),
            new Row(List.of("--provider", "soft"), Map.of("MRD_PROVIDER", "ibverbs"), "soft", "ibverbs", "soft",
                c -> c.get(PROVIDER)),
            new Row(List.of("--max-pinned", "0"), Map.of("MRD_MAX_PINNED", "1GiB"), 0L, GIB, 0L,
                c -> c.get(MAX_PINNED)),
            new Row(List.of("--fail-nth", "0"), Map.of("MRD_FAIL_NTH", "3"), 0, 3, 0, c -> c.get(FAIL_NTH)),
            new Row(List.of("--registration-latency", "0"), Map.of("MRD_REGISTRATION_LATENCY", "5"), 0L, 5L, 0L,
                c -> c.get(REGISTRATION_LATENCY)),
            new Row(List.of("--allow-gid", "7"), Map.of("MRD_ALLOW_GID", "8,9"), List.of(7), List.of(8, 9), List.of(),
                c -> c.get(ALLOW_GID)),
            // Repeated, or separated by commas as in the variable.
            new Row(List.of("--allow-gid", "7", "--allow-gid", "8, 9"), Map.of("MRD_ALLOW_GID", "10"),
                List.of(7, 8, 9), List.of(10), List.of(), c -> c.get(ALLOW_GID)),
            new Row(List.of("--device", "mlx5_0"), Map.of("MRD_DEVICE", "mlx5_1"), "mlx5_0", "mlx5_1", "first",
                c -> c.get(DEVICE).orElse("first")),
            new Row(List.of("--metrics", ":9464"), Map.of("MRD_METRICS", ":9465"), 9464, 9465, -1,
                c -> c.get(METRICS).map(a -> a.getPort()).orElse(-1)),
            new Row(List.of("--journal-size", "off"), Map.of("MRD_JOURNAL_SIZE", "1MiB"), 0L, MIB, 64 * MIB,
                c -> c.get(JOURNAL_SIZE)),
            new Row(List.of("--huge-dir", "none"), Map.of("MRD_HUGE_DIR", "/mnt/huge"), "none", "/mnt/huge", "auto",
                c -> c.hugeDisabled() ? "none" : c.hugeDir().map(Object::toString).orElse("auto")));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("rows")
    void anOptionBeatsItsVariableWhichBeatsTheDefault(final Row row)
    {
        assertEquals(row.flag(), row.value().apply(context(row.option(), row.env())), "the option");
        assertEquals(row.fromEnv(), row.value().apply(context(List.of(), row.env())), "the variable");
        assertEquals(row.byDefault(), row.value().apply(context(List.of(), Map.of())), "the default");
    }

    /**
     * For every setting, the table's or a new one: its option given with the text of its default, and its variable
     * with the same text, which is read only when the option did not reach the context.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("settingsWithAnOption")
    void everyOptionGivenReachesTheContextAndBeatsTheVariable(final DaemonSetting<?> setting)
    {
        if (setting.defaultIsNone())
        {
            return; // no text gives "none": the table has an example of each of these
        }
        final String text = formattedDefault(setting);
        final List<String> option = setting.type().isFlag() ? List.of(Boolean.TRUE.equals(setting.defaultValue()) ?
            setting.option() : "--no-" + setting.option().substring(2)) :
            List.of(setting.option(), text);
        final Map<String, String> env = Map.of(setting.variable(), text);
        assertFalse(start(option).context(env).toString().contains(setting.variable()), "the option was not given");
        assertTrue(start(List.of()).context(env).toString().contains(setting.variable()), "the variable is read");
    }

    static List<DaemonSetting<?>> settingsWithAnOption()
    {
        return DaemonSettings.all().stream().filter(setting -> null != setting.option()).toList();
    }

    private static <T> String formattedDefault(final DaemonSetting<T> setting)
    {
        return setting.type().format(setting.defaultValue());
    }

    @Test
    void theRunDirectoryIsTheOptionThenMrdDir()
    {
        assertEquals("/tmp/mrd-a", context(List.of(), Map.of()).get(DIR).toString());
        final CommandLine.ParseResult parsed = Mrd.commandLine().parseArgs("start");
        final StartCommand start = parsed.subcommand().commandSpec().commandLine().getCommand();
        assertEquals("/tmp/mrd-b", start.context(Map.of("MRD_DIR", "/tmp/mrd-b")).get(DIR).toString());
    }

    @Test
    void aWrongVariableIsRefusedNamingIt()
    {
        final MrdException ex = assertThrows(MrdException.class,
            () -> context(List.of(), Map.of("MRD_MAX_MEMORY", "lots")));
        assertEquals(ErrorCode.EINVAL, ex.code());
        assertTrue(ex.getMessage().startsWith("MRD_MAX_MEMORY='lots' is not a size"), ex.getMessage());
        assertEquals(2 * GIB, context(List.of("--max-memory", "2GiB"), Map.of("MRD_MAX_MEMORY", "lots"))
            .get(MAX_MEMORY));
    }

    @Test
    void theHelpPrintsTheContextsDefaults()
    {
        final String help = Mrd.commandLine().getSubcommands().get("start").getUsageMessage()
            .replaceAll("\\s+", " ");
        for (final String text : List.of("(default: 0x100000000000)", "(default: 2GiB)", "(default: 512MiB)",
            "(default: 1GiB)", "(default: 4096)", "(default: 1048576;", "(default: 256)", "default: 4)",
            "(default: 100)", "(default: soft)", "(default: 0, no mrd limit", "(default: true)",
            "default: " + POPULATE_THREADS.defaultValue() + ", one a processor but one, at least 1 and at most 4)"))
        {
            assertTrue(help.contains(text), help + "\nshould contain " + text);
        }
    }

    private static DaemonContext context(final List<String> options, final Map<String, String> env)
    {
        final List<String> args = new ArrayList<>(List.of("--dir", "/tmp/mrd-a"));
        args.addAll(options);
        return start(args).context(env);
    }

    private static StartCommand start(final List<String> options)
    {
        final List<String> args = new ArrayList<>(List.of("start"));
        args.addAll(options);
        final CommandLine.ParseResult parsed = Mrd.commandLine().parseArgs(args.toArray(String[]::new));
        return parsed.subcommand().commandSpec().commandLine().getCommand();
    }
}
