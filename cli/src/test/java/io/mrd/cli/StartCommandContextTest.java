package io.mrd.cli;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.primary.DaemonContext;
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
                DaemonContext.DEFAULT_MAX_MEMORY, DaemonContext::maxMemory),
            new Row(List.of("--base-virtaddr", "0x100000000000"), Map.of("MRD_BASE_VIRTADDR", "0x200000000000"),
                0x1000_0000_0000L, 0x2000_0000_0000L, DaemonContext.DEFAULT_BASE_VIRTADDR, DaemonContext::baseVirtaddr),
            new Row(List.of("--list-size", "512MiB"), Map.of("MRD_LIST_SIZE", "256MiB"), 512 * MIB, 256 * MIB,
                DaemonContext.DEFAULT_LIST_SIZE, DaemonContext::listSize),
            new Row(List.of("--max-external", "1GiB"), Map.of("MRD_MAX_EXTERNAL", "2GiB"), GIB, 2 * GIB,
                DaemonContext.DEFAULT_MAX_EXTERNAL, DaemonContext::maxExternal),
            new Row(List.of("--max-mrs", "4096"), Map.of("MRD_MAX_MRS", "100"), 4096, 100,
                DaemonContext.DEFAULT_MAX_MRS, DaemonContext::maxMrs),
            new Row(List.of("--cache-capacity", "1048576"), Map.of("MRD_CACHE_CAPACITY", "1000"), 1 << 20, 1000,
                DaemonContext.DEFAULT_CACHE_CAPACITY, DaemonContext::cacheCapacity),
            new Row(List.of("--max-clients", "256"), Map.of("MRD_MAX_CLIENTS", "8"), 256, 8,
                DaemonContext.DEFAULT_MAX_CLIENTS, DaemonContext::maxClients),
            new Row(List.of("--worker-threads", "4"), Map.of("MRD_WORKER_THREADS", "2"), 4, 2,
                DaemonContext.DEFAULT_WORKER_THREADS, DaemonContext::workerThreads),
            new Row(List.of("--populate-threads", "1"), Map.of("MRD_POPULATE_THREADS", "3"), 1, 3,
                DaemonContext.DEFAULT_POPULATE_THREADS, DaemonContext::populateThreads),
            new Row(List.of("--heartbeat-interval", "100"), Map.of("MRD_HEARTBEAT_INTERVAL_MS", "300"), 100, 300,
                100, DaemonContext::heartbeatIntervalMs),
            new Row(List.of("--mr-ext-memseg"), Map.of("MRD_MR_EXT_MEMSEG", "false"), true, false, true,
                DaemonContext::mrExtMemseg),
            new Row(List.of("--no-mr-ext-memseg"), Map.of("MRD_MR_EXT_MEMSEG", "true"), false, true, true,
                DaemonContext::mrExtMemseg),
            new Row(List.of("--provider", "soft"), Map.of("MRD_PROVIDER", "ibverbs"), "soft", "ibverbs", "soft",
                DaemonContext::provider),
            new Row(List.of("--max-pinned", "0"), Map.of("MRD_MAX_PINNED", "1GiB"), 0L, GIB, 0L,
                DaemonContext::maxPinned),
            new Row(List.of("--fail-nth", "0"), Map.of("MRD_FAIL_NTH", "3"), 0, 3, 0, DaemonContext::failNth),
            new Row(List.of("--registration-latency", "0"), Map.of("MRD_REGISTRATION_LATENCY", "5"), 0L, 5000L, 0L,
                DaemonContext::registrationLatencyNanos),
            new Row(List.of("--allow-gid", "7"), Map.of("MRD_ALLOW_GID", "8,9"), List.of(7), List.of(8, 9), List.of(),
                DaemonContext::allowGids),
            new Row(List.of("--device", "mlx5_0"), Map.of("MRD_DEVICE", "mlx5_1"), "mlx5_0", "mlx5_1", "first",
                c -> c.device().orElse("first")),
            new Row(List.of("--metrics", ":9464"), Map.of("MRD_METRICS", ":9465"), 9464, 9465, -1,
                c -> c.metricsAddress().map(a -> a.getPort()).orElse(-1)),
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

    @Test
    void theRunDirectoryIsTheOptionThenMrdDir()
    {
        assertEquals("/tmp/mrd-a", context(List.of(), Map.of()).dir().toString());
        final CommandLine.ParseResult parsed = Mrd.commandLine().parseArgs("start");
        final StartCommand start = parsed.subcommand().commandSpec().commandLine().getCommand();
        assertEquals("/tmp/mrd-b", start.context(Map.of("MRD_DIR", "/tmp/mrd-b")).dir().toString());
    }

    @Test
    void aWrongVariableIsRefusedNamingIt()
    {
        final MrdException ex = assertThrows(MrdException.class,
            () -> context(List.of(), Map.of("MRD_MAX_MEMORY", "lots")));
        assertEquals(ErrorCode.EINVAL, ex.code());
        assertTrue(ex.getMessage().startsWith("MRD_MAX_MEMORY='lots' is not a size"), ex.getMessage());
        assertEquals(2 * GIB, context(List.of("--max-memory", "2GiB"), Map.of("MRD_MAX_MEMORY", "lots")).maxMemory());
    }

    @Test
    void theHelpPrintsTheContextsDefaults()
    {
        final String help = Mrd.commandLine().getSubcommands().get("start").getUsageMessage()
            .replaceAll("\\s+", " ");
        for (final String text : List.of("(default: 0x100000000000)", "(default: 2GiB)", "(default: 512MiB)",
            "(default: 1GiB)", "(default: 4096)", "(default: 1048576;", "(default: 256)", "default: 4)",
            "(default: 100)", "(default: soft)", "(default: 0, no mrd limit", "(default: true)",
            "default: " + DaemonContext.DEFAULT_POPULATE_THREADS + ", one a processor and at most 4)"))
        {
            assertTrue(help.contains(text), help + "\nshould contain " + text);
        }
    }

    private static DaemonContext context(final List<String> options, final Map<String, String> env)
    {
        final List<String> args = new ArrayList<>(List.of("start", "--dir", "/tmp/mrd-a"));
        args.addAll(options);
        final CommandLine.ParseResult parsed = Mrd.commandLine().parseArgs(args.toArray(String[]::new));
        final StartCommand start = parsed.subcommand().commandSpec().commandLine().getCommand();
        return start.context(env);
    }
}
