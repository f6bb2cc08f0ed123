package io.mrd.primary;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.Heartbeat;
import io.mrd.layout.MrdException;
import io.mrd.layout.RunDirectoryPath;
import io.mrd.primary.provider.ProviderConfig;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.stream.Collectors;
import java.util.stream.Stream;

import static io.mrd.layout.sys.Sizes.GIB;
import static io.mrd.layout.sys.Sizes.MIB;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Where every daemon setting comes from: the command line (a setter) beats its {@code MRD_*} variable, which
 * beats the default; a variable that cannot be read, or a value {@link DaemonContext#conclude()} refuses, gives an
 * error naming the option, the variable, the value and what would be right.
 */
final class DaemonContextTest
{
    /**
     * One setting: how the command line sets it, the text of its variable, and the value each source gives.
     *
     * @param badText a text the variable cannot be read as, or null when any text is a value.
     */
    record Row(
        DaemonSetting setting,
        Consumer<DaemonContext> flag,
        Object flagValue,
        String envText,
        Object envValue,
        Object defaultValue,
        Function<DaemonContext, Object> value,
        String badText)
    {
        public String toString()
        {
            return setting.name();
        }
    }

    static List<Row> rows()
    {
        return List.of(
            new Row(DaemonSetting.DIR, c -> c.dir(Path.of("/tmp/mrd-flag")), Path.of("/tmp/mrd-flag"),
                "/tmp/mrd-env", Path.of("/tmp/mrd-env"), RunDirectoryPath.resolve(null, Map.of()),
                DaemonContext::dir, null),
            new Row(DaemonSetting.HUGE_DIR, c -> c.hugeDir("/mnt/huge-flag"), Optional.of(Path.of("/mnt/huge-flag")),
                "/mnt/huge-env", Optional.of(Path.of("/mnt/huge-env")), Optional.empty(), DaemonContext::hugeDir, null),
            new Row(DaemonSetting.BASE_VIRTADDR, c -> c.baseVirtaddr(0x2000_0000_0000L), 0x2000_0000_0000L,
                "0x300000000000", 0x3000_0000_0000L, DaemonContext.DEFAULT_BASE_VIRTADDR, DaemonContext::baseVirtaddr,
                "high"),
            // The flag repeats the default, and still beats the variable: unset is not "equals the default".
            new Row(DaemonSetting.MAX_MEMORY, c -> c.maxMemory(2 * GIB), 2 * GIB, "4GiB", 4 * GIB,
                DaemonContext.DEFAULT_MAX_MEMORY, DaemonContext::maxMemory, "lots"),
            new Row(DaemonSetting.LIST_SIZE, c -> c.listSize(64 * MIB), 64 * MIB, "128MiB", 128 * MIB,
                DaemonContext.DEFAULT_LIST_SIZE, DaemonContext::listSize, "big"),
            new Row(DaemonSetting.MAX_EXTERNAL, c -> c.maxExternal(4 * MIB), 4 * MIB, "8MiB", 8 * MIB,
                DaemonContext.DEFAULT_MAX_EXTERNAL, DaemonContext::maxExternal, "some"),
            new Row(DaemonSetting.MAX_MRS, c -> c.maxMrs(100), 100, "200", 200, DaemonContext.DEFAULT_MAX_MRS,
                DaemonContext::maxMrs, "many"),
            new Row(DaemonSetting.CACHE_CAPACITY, c -> c.cacheCapacity(1000), 1000, "2000", 2000,
                DaemonContext.DEFAULT_CACHE_CAPACITY, DaemonContext::cacheCapacity, "1e6"),
            new Row(DaemonSetting.MAX_CLIENTS, c -> c.maxClients(10), 10, "20", 20, DaemonContext.DEFAULT_MAX_CLIENTS,
                DaemonContext::maxClients, "ten"),
            new Row(DaemonSetting.WORKER_THREADS, c -> c.workerThreads(2), 2, "3", 3,
                DaemonContext.DEFAULT_WORKER_THREADS, DaemonContext::workerThreads, "2.5"),
            new Row(DaemonSetting.POPULATE_THREADS, c -> c.populateThreads(1), 1, "3", 3,
                DaemonContext.DEFAULT_POPULATE_THREADS, DaemonContext::populateThreads, "two"),
            new Row(DaemonSetting.HEARTBEAT_INTERVAL, c -> c.heartbeatIntervalMs(300), 300, "500", 500,
                Heartbeat.DEFAULT_INTERVAL_MS, DaemonContext::heartbeatIntervalMs, "fast"),
            new Row(DaemonSetting.MR_EXT_MEMSEG, c -> c.mrExtMemseg(true), true, "false", false,
                DaemonContext.DEFAULT_MR_EXT_MEMSEG, DaemonContext::mrExtMemseg, "maybe"),
            new Row(DaemonSetting.PROVIDER, c -> c.provider("soft"), "soft", "ibverbs", "ibverbs", ProviderConfig.SOFT,
                DaemonContext::provider, null),
            new Row(DaemonSetting.DEVICE, c -> c.device("mlx5_0"), Optional.of("mlx5_0"), "mlx5_1",
                Optional.of("mlx5_1"), Optional.empty(), DaemonContext::device, null),
            new Row(DaemonSetting.MAX_PINNED, c -> c.maxPinned(GIB), GIB, "2GiB", 2 * GIB,
                DaemonContext.DEFAULT_MAX_PINNED, DaemonContext::maxPinned, "-"),
            new Row(DaemonSetting.ALLOW_GID, c -> c.allowGid(100), List.of(100), "200, 300", List.of(200, 300),
                List.of(), DaemonContext::allowGids, "wheel"),
            new Row(DaemonSetting.METRICS, c -> c.metrics(":9464"),
                Optional.of(new InetSocketAddress("127.0.0.1", 9464)),
                "127.0.0.1:9465", Optional.of(new InetSocketAddress("127.0.0.1", 9465)), Optional.empty(),
                DaemonContext::metricsAddress, "localhost:http"),
            new Row(DaemonSetting.FAIL_NTH, c -> c.failNth(3), 3, "5", 5, DaemonContext.DEFAULT_FAIL_NTH,
                DaemonContext::failNth, "third"),
            new Row(DaemonSetting.REGISTRATION_LATENCY, c -> c.registrationLatencyNanos(2000), 2000L, "7", 7000L,
                DaemonContext.DEFAULT_REGISTRATION_LATENCY_NANOS, DaemonContext::registrationLatencyNanos, "7us"),
            new Row(DaemonSetting.JOURNAL_SIZE, c -> c.journalSize("off"), 0L, "1MiB", MIB,
                DaemonContext.DEFAULT_JOURNAL_SIZE, DaemonContext::journalSize, "none"),
            new Row(DaemonSetting.IBVERBS_LIBRARY, c -> c.ibverbsLibrary("/opt/flag/libibverbs.so.1"),
                "/opt/flag/libibverbs.so.1", "/opt/env/libibverbs.so.1", "/opt/env/libibverbs.so.1",
                ProviderConfig.DEFAULT_LIBRARY, DaemonContext::ibverbsLibrary, null));
    }

    @Test
    void theTableHasEverySetting()
    {
        assertEquals(EnumSet.allOf(DaemonSetting.class),
            rows().stream().map(Row::setting)
                .collect(Collectors.toCollection(() -> EnumSet.noneOf(DaemonSetting.class))));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("rows")
    void withoutFlagOrVariableTheDefault(final Row row)
    {
        assertEquals(row.defaultValue(), row.value().apply(new DaemonContext().applyEnvironment(Map.of()).conclude()));
        assertEquals(row.defaultValue(), row.value().apply(new DaemonContext().conclude()), "no environment applied");
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("rows")
    void theVariableBeatsTheDefault(final Row row)
    {
        final DaemonContext context = new DaemonContext().applyEnvironment(env(row, row.envText())).conclude();
        assertEquals(row.envValue(), row.value().apply(context));
        assertTrue(context.toString().contains(row.setting().variable()), context::toString);
        if (DaemonSetting.DIR != row.setting())
        {
            // MRD_DIR is read as RunDirectoryPath reads it for the clients too, blanks and all.
            assertEquals(row.envValue(), row.value().apply(new DaemonContext()
                .applyEnvironment(env(row, "  " + row.envText() + " ")).conclude()), "blanks around the value");
        }
        assertEquals(row.defaultValue(), row.value().apply(new DaemonContext()
            .applyEnvironment(env(row, " ")).conclude()), "a blank variable is unset");
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("rows")
    void theCommandLineBeatsTheVariable(final Row row)
    {
        final DaemonContext before = new DaemonContext();
        row.flag().accept(before);
        assertEquals(row.flagValue(), row.value().apply(before.applyEnvironment(env(row, row.envText())).conclude()));

        final DaemonContext after = new DaemonContext().applyEnvironment(env(row, row.envText()));
        row.flag().accept(after);
        assertEquals(row.flagValue(), row.value().apply(after.conclude()), "a flag given after the environment");
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("rows")
    void aVariableThatIsNotAValueIsRefusedNamingIt(final Row row)
    {
        if (null == row.badText())
        {
            return;
        }
        final MrdException ex = assertThrows(MrdException.class,
            () -> new DaemonContext().applyEnvironment(env(row, row.badText())));
        assertEquals(ErrorCode.EINVAL, ex.code());
        assertTrue(ex.getMessage().startsWith(row.setting().variable() + "='" + row.badText() + "' is not "),
            ex.getMessage());
        assertTrue(ex.getMessage().contains("give " + row.setting().option()), ex.getMessage());

        final DaemonContext given = new DaemonContext();
        row.flag().accept(given);
        assertEquals(row.flagValue(), row.value().apply(given.applyEnvironment(env(row, row.badText())).conclude()),
            "a variable the command line overrides is not read");
    }

    /**
     * A value conclude() refuses: the settings that make it, how, and what the error must say.
     */
    record Refusal(String name, Consumer<DaemonContext> given, Map<String, String> env, List<String> says)
    {
        public String toString()
        {
            return name;
        }
    }

    static List<Refusal> refusals()
    {
        return List.of(
            new Refusal("unaligned base", c -> c.baseVirtaddr(0x1234), Map.of(), List.of(
                "--base-virtaddr 0x1234 must be a multiple of 1GiB below 0x7f0000000000",
                "e.g. 0x100000000000", "--base-virtaddr as given, which beats MRD_BASE_VIRTADDR")),
            new Refusal("base from the variable", c -> { }, Map.of("MRD_BASE_VIRTADDR", "0x7f0000000000"), List.of(
                "--base-virtaddr 0x7f0000000000 must be a multiple of 1GiB below", "from MRD_BASE_VIRTADDR")),
            new Refusal("memory past the address space", c -> c.baseVirtaddr(0x7E00_0000_0000L).maxMemory(512 * GIB),
                Map.of("MRD_LIST_SIZE", "16GiB"), List.of("memory from --base-virtaddr 0x7e0000000000 would reach",
                    "past 0x7f0000000000",
                    "--base-virtaddr as given", "--max-memory as given", "--max-external by default: give it, or " +
                    "set MRD_MAX_EXTERNAL")),
            new Refusal("memory not in segments", c -> { }, Map.of("MRD_MAX_MEMORY", "3MiB"), List.of(
                "--max-memory 3MiB must be a positive multiple of 2MiB (--max-memory from MRD_MAX_MEMORY)")),
            new Refusal("list not in segments", c -> c.listSize(MIB), Map.of(), List.of(
                "--list-size 1MiB must be a positive multiple of 2MiB", "MRD_LIST_SIZE")),
            new Refusal("memory not in lists", c -> c.maxMemory(6 * MIB), Map.of("MRD_LIST_SIZE", "4MiB"), List.of(
                "--max-memory 6MiB must be a multiple of --list-size 4MiB", "--list-size from MRD_LIST_SIZE",
                "--max-memory as given, which beats MRD_MAX_MEMORY")),
            new Refusal("too many lists", c -> c.maxMemory(130 * MIB).listSize(2 * MIB), Map.of(), List.of(
                "--max-memory 130MiB / --list-size 2MiB gives 65 lists, more than 64: raise --list-size",
                "MRD_LIST_SIZE")),
            new Refusal("external not in segments", c -> { }, Map.of("MRD_MAX_EXTERNAL", "3MiB"), List.of(
                "--max-external 3MiB must be a multiple of 2MiB", "from MRD_MAX_EXTERNAL")),
            new Refusal("no MRs", c -> c.maxMrs(0), Map.of(), List.of("--max-mrs 0 must be between 1 and 1048576",
                "MRD_MAX_MRS")),
            new Refusal("a cache of one", c -> { }, Map.of("MRD_CACHE_CAPACITY", "1"), List.of(
                "--cache-capacity 1 must be between 2 and 67108864", "from MRD_CACHE_CAPACITY")),
            new Refusal("no clients", c -> c.maxClients(0), Map.of(), List.of(
                "--max-clients 0 must be between 1 and 65536", "MRD_MAX_CLIENTS")),
            new Refusal("heartbeat too fast", c -> { }, Map.of("MRD_HEARTBEAT_INTERVAL_MS", "5"), List.of(
                "--heartbeat-interval 5 ms must be between 10 and 10000",
                "from MRD_HEARTBEAT_INTERVAL_MS")),
            new Refusal("no threads", c -> c.workerThreads(0), Map.of(), List.of(
                "--worker-threads 0 must be between 1 and 256", "MRD_WORKER_THREADS")),
            new Refusal("no populate threads", c -> c.populateThreads(0), Map.of(), List.of(
                "--populate-threads 0 must be between 1 and 64", "MRD_POPULATE_THREADS")),
            new Refusal("too many populate threads", c -> { }, Map.of("MRD_POPULATE_THREADS", "65"), List.of(
                "--populate-threads 65 must be between 1 and 64", "from MRD_POPULATE_THREADS")),
            new Refusal("unknown provider", c -> { }, Map.of("MRD_PROVIDER", "rxe"), List.of(
                "unknown provider 'rxe': --provider takes one of soft, ibverbs", "from MRD_PROVIDER")),
            new Refusal("blank provider", c -> c.provider(" "), Map.of(), List.of("unknown provider ' '")),
            new Refusal("negative pinned", c -> c.maxPinned(-1), Map.of(), List.of(
                "--max-pinned -1 is negative: give a size such as 16GiB, or 0 for no limit", "MRD_MAX_PINNED")),
            new Refusal("negative gid", c -> { }, Map.of("MRD_ALLOW_GID", "10,-1"), List.of(
                "--allow-gid -1 is negative", "from MRD_ALLOW_GID")),
            new Refusal("negative fail-nth", c -> c.failNth(-2), Map.of(), List.of(
                "--fail-nth -2 is negative: give N >= 1 to fail the Nth registration, or 0", "MRD_FAIL_NTH")),
            new Refusal("negative latency", c -> c.registrationLatencyNanos(-1), Map.of(), List.of(
                "--registration-latency -0.001 must be between 0 and 10000000 microseconds",
                "MRD_REGISTRATION_LATENCY")),
            new Refusal("small journal", c -> c.journalSize("4KiB"), Map.of(), List.of(
                "--journal-size 4KiB must be 0 (off) or between 64KiB and 4GiB", "MRD_JOURNAL_SIZE")),
            new Refusal("huge journal", c -> { }, Map.of("MRD_JOURNAL_SIZE", "5GiB"), List.of(
                "--journal-size 5GiB must be 0 (off) or between 64KiB and 4GiB", "from MRD_JOURNAL_SIZE")));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("refusals")
    void concludeRefusesAWrongValueNamingOptionVariableValueAndRemedy(final Refusal refusal)
    {
        final DaemonContext context = new DaemonContext().dir(Path.of("/tmp/mrd-test"));
        refusal.given().accept(context);
        context.applyEnvironment(refusal.env());
        final MrdException ex = assertThrows(MrdException.class, context::conclude);
        assertEquals(ErrorCode.EINVAL, ex.code());
        assertTrue(ex.getMessage().startsWith(refusal.says().getFirst()), ex.getMessage());
        for (final String text : refusal.says())
        {
            assertTrue(ex.getMessage().contains(text), "'" + ex.getMessage() + "' should say '" + text + "'");
        }
    }

    @Test
    void theMetricsOptionNamesItsFormWhenItIsNotHostAndPort()
    {
        final MrdException ex = assertThrows(MrdException.class, () -> new DaemonContext().metrics("localhost"));
        assertEquals("--metrics 'localhost' is not HOST:PORT with a host that resolves and a port of 0 to 65535 " +
            "(e.g. 127.0.0.1:9464 or :9464)", ex.getMessage());
    }

    @Test
    void variablesAreTheOptionNamesInCapitalsAsTheStartHelpSays()
    {
        final Set<DaemonSetting> irregular =
            EnumSet.of(DaemonSetting.HEARTBEAT_INTERVAL, DaemonSetting.IBVERBS_LIBRARY);
        for (final DaemonSetting setting : DaemonSetting.values())
        {
            if (!irregular.contains(setting))
            {
                assertEquals("MRD_" + setting.option().substring(2).toUpperCase().replace('-', '_'),
                    setting.variable());
            }
        }
        assertEquals("MRD_HEARTBEAT_INTERVAL_MS", DaemonSetting.HEARTBEAT_INTERVAL.variable());
        assertEquals(ProviderConfig.LIBRARY_ENV, DaemonSetting.IBVERBS_LIBRARY.variable());
        assertEquals(DaemonSetting.values().length,
            Arrays.stream(DaemonSetting.values()).map(DaemonSetting::variable).distinct().count(), "one variable each");
    }

    @Test
    void theDaemonsMemoryEndsOneTebibyteBelowTheUserAddressSpace()
    {
        assertEquals(0x7F00_0000_0000L, DaemonContext.ADDRESS_SPACE_END);
        final long base = DaemonContext.ADDRESS_SPACE_END - 4 * GIB;
        new DaemonContext().baseVirtaddr(base).maxMemory(2 * MIB).maxExternal(0).conclude();
        assertThrows(MrdException.class,
            () -> new DaemonContext().baseVirtaddr(base).maxMemory(2 * GIB).maxExternal(2 * MIB).conclude());
    }

    @Test
    void theProviderConfigIsTheContextsProviderSettings()
    {
        final ProviderConfig config = new DaemonContext().provider("ibverbs").device("mlx5_2").maxPinned(GIB)
            .failNth(4).registrationLatencyNanos(1000).populateThreads(3)
            .applyEnvironment(Map.of(ProviderConfig.LIBRARY_ENV, "/opt/stand-in/libibverbs.so.1"))
            .conclude().providerConfig();
        assertEquals(new ProviderConfig("ibverbs", GIB, 4, 1000, Optional.of("mlx5_2"),
            Optional.of(Path.of("/opt/stand-in/libibverbs.so.1")), 3), config);
        assertEquals("/opt/stand-in/libibverbs.so.1", config.library());
        assertEquals(ProviderConfig.DEFAULT_LIBRARY, new DaemonContext().conclude().providerConfig().library());
    }

    @Test
    void toStringPrintsEverySettingAndTheVariablesRead()
    {
        final String text = new DaemonContext().maxMemory(64 * MIB).listSize(32 * MIB)
            .applyEnvironment(Map.of("MRD_MAX_MEMORY", "4GiB", "MRD_HEARTBEAT_INTERVAL_MS", "250")).conclude()
            .toString();
        for (final String field : List.of("dir=", "hugeDir=auto", "baseVirtaddr=0x100000000000", "maxMemory=64MiB",
            "listSize=32MiB", "lists=2x32MiB", "segmentSize=2MiB", "maxExternal=1GiB", "maxMrs=4096",
            "cacheCapacity=1048576", "maxClients=256", "heartbeatIntervalMs=250", "workerThreads=4",
            "populateThreads=" + DaemonContext.DEFAULT_POPULATE_THREADS,
            "mrExtMemseg=true", "provider=soft", "device=first", "maxPinned=unlimited", "allowGids=[]",
            "metrics=off", "failNth=0", "registrationLatencyNanos=0", "ibverbsLibrary=libibverbs.so.1",
            "journalSize=64MiB", "fromEnvironment=[MRD_HEARTBEAT_INTERVAL_MS]"))
        {
            assertTrue(text.contains(field), text + " should contain " + field);
        }
    }

    private static Map<String, String> env(final Row row, final String text)
    {
        return Stream.of(row.setting()).collect(Collectors.toMap(DaemonSetting::variable, s -> text));
    }
}
