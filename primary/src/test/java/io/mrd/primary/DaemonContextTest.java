package io.mrd.primary;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.Heartbeat;
import io.mrd.layout.MrdException;
import io.mrd.layout.RunDirectoryPath;
import io.mrd.primary.provider.PagePopulator;
import io.mrd.primary.provider.ProviderConfig;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Consumer;

import static io.mrd.layout.sys.Sizes.GIB;
import static io.mrd.layout.sys.Sizes.KIB;
import static io.mrd.layout.sys.Sizes.MIB;
import static io.mrd.primary.DaemonSettings.BASE_VIRTADDR;
import static io.mrd.primary.DaemonSettings.DEVICE;
import static io.mrd.primary.DaemonSettings.DIR;
import static io.mrd.primary.DaemonSettings.FAIL_NTH;
import static io.mrd.primary.DaemonSettings.JOURNAL_SIZE;
import static io.mrd.primary.DaemonSettings.LIST_SIZE;
import static io.mrd.primary.DaemonSettings.MAX_CLIENTS;
import static io.mrd.primary.DaemonSettings.MAX_EXTERNAL;
import static io.mrd.primary.DaemonSettings.MAX_MEMORY;
import static io.mrd.primary.DaemonSettings.MAX_MRS;
import static io.mrd.primary.DaemonSettings.MAX_PINNED;
import static io.mrd.primary.DaemonSettings.POPULATE_THREADS;
import static io.mrd.primary.DaemonSettings.PROVIDER;
import static io.mrd.primary.DaemonSettings.REGISTRATION_LATENCY;
import static io.mrd.primary.DaemonSettings.WORKER_THREADS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Where every daemon setting comes from: the command line ({@link DaemonContext#set}) beats its {@code MRD_*}
 * variable, which beats the default; a variable that cannot be read, or a value {@link DaemonContext#conclude()}
 * refuses, gives an error naming the option, the variable, the value and what would be right.
 */
final class DaemonContextTest
{
    /**
     * One setting: the value the command line gives, the text of its variable and the value that gives, and the
     * documented default.
     *
     * @param badText a text the variable cannot be read as, or null when any text is a value.
     */
    record Row(DaemonSetting<?> setting, Object flagValue, String envText, Object envValue, Object defaultValue,
        String badText)
    {
        public String toString()
        {
            return setting.name();
        }

        void flag(final DaemonContext context)
        {
            give(context, setting, flagValue);
        }

        private static <T> void give(final DaemonContext context, final DaemonSetting<T> setting, final Object value)
        {
            @SuppressWarnings("unchecked") final T typed = (T)value;
            context.set(setting, typed);
        }

        Object value(final DaemonContext context)
        {
            return context.get(setting);
        }
    }

    private static <T> Row row(
        final DaemonSetting<T> setting, final T flag, final String envText, final T env, final T byDefault,
        final String badText)
    {
        return new Row(setting, flag, envText, env, byDefault, badText);
    }

    /**
     * Every setting of today. A new one needs no line here: reading the command line, a variable and a default
     * is the same code for every row, and what each row must be is {@code DaemonSettingTest}'s.
     */
    static List<Row> rows()
    {
        return List.of(
            row(DaemonSettings.DIR, Path.of("/tmp/mrd-flag"), "/tmp/mrd-env", Path.of("/tmp/mrd-env"),
                RunDirectoryPath.resolve(null, Map.of()), null),
            row(DaemonSettings.HUGE_DIR, Optional.of("/mnt/huge-flag"), "/mnt/huge-env", Optional.of("/mnt/huge-env"),
                Optional.empty(), null),
            row(DaemonSettings.BASE_VIRTADDR, 0x2000_0000_0000L, "0x300000000000", 0x3000_0000_0000L,
                0x1000_0000_0000L, "high"),
            // The flag repeats the default, and still beats the variable: unset is not "equals the default".
            row(DaemonSettings.MAX_MEMORY, 2 * GIB, "4GiB", 4 * GIB, 2 * GIB, "lots"),
            row(DaemonSettings.LIST_SIZE, 64 * MIB, "128MiB", 128 * MIB, 512 * MIB, "big"),
            row(DaemonSettings.MAX_EXTERNAL, 4 * MIB, "8MiB", 8 * MIB, GIB, "some"),
            row(DaemonSettings.MAX_MRS, 100, "200", 200, 4096, "many"),
            row(DaemonSettings.CACHE_CAPACITY, 1000, "2000", 2000, 1 << 20, "1e6"),
            row(DaemonSettings.MAX_CLIENTS, 10, "20", 20, 256, "ten"),
            row(DaemonSettings.WORKER_THREADS, 2, "3", 3, 4, "2.5"),
            row(DaemonSettings.POPULATE_THREADS, 1, "3", 3, PagePopulator.defaultThreads(), "two"),
            row(DaemonSettings.HEARTBEAT_INTERVAL, 300, "500", 500, Heartbeat.DEFAULT_INTERVAL_MS, "fast"),
            row(DaemonSettings.MR_EXT_MEMSEG, true, "false", false, true, "maybe"),
            row(DaemonSettings.PROVIDER, "soft", "ibverbs", "ibverbs", ProviderConfig.SOFT, null),
            row(DaemonSettings.DEVICE, Optional.of("mlx5_0"), "mlx5_1", Optional.of("mlx5_1"), Optional.empty(), null),
            row(DaemonSettings.MAX_PINNED, GIB, "2GiB", 2 * GIB, 0L, "-"),
            row(DaemonSettings.ALLOW_GID, List.of(100), "200, 300", List.of(200, 300), List.of(), "wheel"),
            row(DaemonSettings.METRICS, Optional.of(new InetSocketAddress("127.0.0.1", 9464)), "127.0.0.1:9465",
                Optional.of(new InetSocketAddress("127.0.0.1", 9465)), Optional.empty(), "localhost:http"),
            row(DaemonSettings.FAIL_NTH, 3, "5", 5, 0, "third"),
            row(DaemonSettings.REGISTRATION_LATENCY, 2L, "7", 7L, 0L, "7us"),
            row(DaemonSettings.JOURNAL_SIZE, 0L, "1MiB", MIB, 64 * MIB, "none"),
            row(DaemonSettings.IBVERBS_LIBRARY, "/opt/flag/libibverbs.so.1", "/opt/env/libibverbs.so.1",
                "/opt/env/libibverbs.so.1", ProviderConfig.DEFAULT_LIBRARY, null));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("rows")
    void withoutFlagOrVariableTheDefault(final Row row)
    {
        assertEquals(row.defaultValue(), row.value(new DaemonContext().applyEnvironment(Map.of()).conclude()));
        assertEquals(row.defaultValue(), row.value(new DaemonContext().conclude()), "no environment applied");
        assertEquals(row.defaultValue(), row.setting().defaultValue(), "the row's default");
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("rows")
    void theVariableBeatsTheDefault(final Row row)
    {
        final DaemonContext context = new DaemonContext().applyEnvironment(env(row, row.envText())).conclude();
        assertEquals(row.envValue(), row.value(context));
        assertTrue(context.toString().contains(row.setting().variable()), context::toString);
        if (DaemonSettings.DIR != row.setting())
        {
            // MRD_DIR is read as RunDirectoryPath reads it for the clients too, blanks and all.
            assertEquals(row.envValue(), row.value(new DaemonContext()
                .applyEnvironment(env(row, "  " + row.envText() + " ")).conclude()), "blanks around the value");
        }
        assertEquals(row.defaultValue(), row.value(new DaemonContext()
            .applyEnvironment(env(row, " ")).conclude()), "a blank variable is unset");
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("rows")
    void theCommandLineBeatsTheVariable(final Row row)
    {
        final DaemonContext before = new DaemonContext();
        row.flag(before);
        assertEquals(row.flagValue(), row.value(before.applyEnvironment(env(row, row.envText())).conclude()));

        final DaemonContext after = new DaemonContext().applyEnvironment(env(row, row.envText()));
        row.flag(after);
        assertEquals(row.flagValue(), row.value(after.conclude()), "a flag given after the environment");
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
        final MrdException asOption = assertThrows(MrdException.class, () -> row.setting().parse(row.badText()));
        assertEquals(ErrorCode.EINVAL, asOption.code());
        assertTrue(asOption.getMessage().contains("'" + row.badText() + "'"), asOption.getMessage());

        final DaemonContext given = new DaemonContext();
        row.flag(given);
        assertEquals(row.flagValue(), row.value(given.applyEnvironment(env(row, row.badText())).conclude()),
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
            new Refusal("unaligned base", c -> c.set(BASE_VIRTADDR, 0x1234L), Map.of(), List.of(
                "--base-virtaddr 0x1234 must be a multiple of 1GiB below 0x7f0000000000",
                "e.g. 0x100000000000", "--base-virtaddr as given, which beats MRD_BASE_VIRTADDR")),
            new Refusal("base from the variable", c -> { }, Map.of("MRD_BASE_VIRTADDR", "0x7f0000000000"), List.of(
                "--base-virtaddr 0x7f0000000000 must be a multiple of 1GiB below", "from MRD_BASE_VIRTADDR")),
            new Refusal("memory past the address space",
                c -> c.set(BASE_VIRTADDR, 0x7E00_0000_0000L).set(MAX_MEMORY, 512 * GIB),
                Map.of("MRD_LIST_SIZE", "16GiB"), List.of("memory from --base-virtaddr 0x7e0000000000 would reach",
                    "past 0x7f0000000000",
                    "--base-virtaddr as given", "--max-memory as given", "--max-external by default: give it, or " +
                    "set MRD_MAX_EXTERNAL")),
            new Refusal("memory not in segments", c -> { }, Map.of("MRD_MAX_MEMORY", "3MiB"), List.of(
                "--max-memory 3MiB must be a positive multiple of 2MiB (--max-memory from MRD_MAX_MEMORY)")),
            new Refusal("list not in segments", c -> c.set(LIST_SIZE, MIB), Map.of(), List.of(
                "--list-size 1MiB must be a positive multiple of 2MiB", "MRD_LIST_SIZE")),
            new Refusal("memory not in lists", c -> c.set(MAX_MEMORY, 6 * MIB), Map.of("MRD_LIST_SIZE", "4MiB"),
                List.of("--max-memory 6MiB must be a multiple of --list-size 4MiB", "--list-size from MRD_LIST_SIZE",
                    "--max-memory as given, which beats MRD_MAX_MEMORY")),
            new Refusal("too many lists", c -> c.set(MAX_MEMORY, 130 * MIB).set(LIST_SIZE, 2 * MIB), Map.of(), List.of(
                "--max-memory 130MiB / --list-size 2MiB gives 65 lists, more than 64: raise --list-size",
                "MRD_LIST_SIZE")),
            new Refusal("external not in segments", c -> { }, Map.of("MRD_MAX_EXTERNAL", "3MiB"), List.of(
                "--max-external 3MiB must be a multiple of 2MiB", "from MRD_MAX_EXTERNAL")),
            new Refusal("no MRs", c -> c.set(MAX_MRS, 0), Map.of(), List.of("--max-mrs 0 must be between 1 and 1048576",
                "MRD_MAX_MRS")),
            new Refusal("a cache of one", c -> { }, Map.of("MRD_CACHE_CAPACITY", "1"), List.of(
                "--cache-capacity 1 must be between 2 and 67108864", "from MRD_CACHE_CAPACITY")),
            new Refusal("no clients", c -> c.set(MAX_CLIENTS, 0), Map.of(), List.of(
                "--max-clients 0 must be between 1 and 65536", "MRD_MAX_CLIENTS")),
            new Refusal("heartbeat too fast", c -> { }, Map.of("MRD_HEARTBEAT_INTERVAL_MS", "5"), List.of(
                "--heartbeat-interval 5 ms must be between 10 and 10000",
                "from MRD_HEARTBEAT_INTERVAL_MS")),
            new Refusal("no threads", c -> c.set(WORKER_THREADS, 0), Map.of(), List.of(
                "--worker-threads 0 must be between 1 and 256", "MRD_WORKER_THREADS")),
            new Refusal("no populate threads", c -> c.set(POPULATE_THREADS, 0), Map.of(), List.of(
                "--populate-threads 0 must be between 1 and 64", "MRD_POPULATE_THREADS")),
            new Refusal("too many populate threads", c -> { }, Map.of("MRD_POPULATE_THREADS", "65"), List.of(
                "--populate-threads 65 must be between 1 and 64", "from MRD_POPULATE_THREADS")),
            new Refusal("unknown provider", c -> { }, Map.of("MRD_PROVIDER", "rxe"), List.of(
                "unknown provider 'rxe': --provider takes one of soft, ibverbs", "from MRD_PROVIDER")),
            new Refusal("blank provider", c -> c.set(PROVIDER, " "), Map.of(), List.of("unknown provider ' '")),
            new Refusal("negative pinned", c -> c.set(MAX_PINNED, -1L), Map.of(), List.of(
                "--max-pinned -1 is negative: give a size such as 16GiB, or 0 for no limit", "MRD_MAX_PINNED")),
            new Refusal("negative gid", c -> { }, Map.of("MRD_ALLOW_GID", "10,-1"), List.of(
                "--allow-gid -1 is negative", "from MRD_ALLOW_GID")),
            new Refusal("negative fail-nth", c -> c.set(FAIL_NTH, -2), Map.of(), List.of(
                "--fail-nth -2 is negative: give N >= 1 to fail the Nth registration, or 0", "MRD_FAIL_NTH")),
            new Refusal("negative latency", c -> c.set(REGISTRATION_LATENCY, -1L), Map.of(), List.of(
                "--registration-latency -1 must be between 0 and 10000000 microseconds",
                "MRD_REGISTRATION_LATENCY")),
            new Refusal("small journal", c -> c.set(JOURNAL_SIZE, 4 * KIB), Map.of(), List.of(
                "--journal-size 4KiB must be 0 (off) or between 64KiB and 4GiB", "MRD_JOURNAL_SIZE")),
            new Refusal("huge journal", c -> { }, Map.of("MRD_JOURNAL_SIZE", "5GiB"), List.of(
                "--journal-size 5GiB must be 0 (off) or between 64KiB and 4GiB", "from MRD_JOURNAL_SIZE")));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("refusals")
    void concludeRefusesAWrongValueNamingOptionVariableValueAndRemedy(final Refusal refusal)
    {
        final DaemonContext context = new DaemonContext().set(DIR, Path.of("/tmp/mrd-test"));
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
    void theDaemonsMemoryEndsOneTebibyteBelowTheUserAddressSpace()
    {
        assertEquals(0x7F00_0000_0000L, DaemonContext.ADDRESS_SPACE_END);
        final long base = DaemonContext.ADDRESS_SPACE_END - 4 * GIB;
        new DaemonContext().set(BASE_VIRTADDR, base).set(MAX_MEMORY, 2 * MIB).set(MAX_EXTERNAL, 0L).conclude();
        assertThrows(MrdException.class, () -> new DaemonContext().set(BASE_VIRTADDR, base).set(MAX_MEMORY, 2 * GIB)
            .set(MAX_EXTERNAL, 2 * MIB).conclude());
    }

    @Test
    void theProviderConfigIsTheContextsProviderSettings()
    {
        final ProviderConfig config = new DaemonContext().set(PROVIDER, "ibverbs").set(DEVICE, Optional.of("mlx5_2"))
            .set(MAX_PINNED, GIB).set(FAIL_NTH, 4).set(REGISTRATION_LATENCY, 1L).set(POPULATE_THREADS, 3)
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
        final String text = new DaemonContext().set(MAX_MEMORY, 64 * MIB).set(LIST_SIZE, 32 * MIB)
            .applyEnvironment(Map.of("MRD_MAX_MEMORY", "4GiB", "MRD_HEARTBEAT_INTERVAL_MS", "250")).conclude()
            .toString();
        for (final String field : List.of("dir=", "hugeDir=auto", "baseVirtaddr=0x100000000000", "maxMemory=64MiB",
            "listSize=32MiB", "lists=2x32MiB", "segmentSize=2MiB", "maxExternal=1GiB", "maxMrs=4096",
            "cacheCapacity=1048576", "maxClients=256", "heartbeatIntervalMs=250", "workerThreads=4",
            "populateThreads=" + PagePopulator.defaultThreads(),
            "mrExtMemseg=true", "provider=soft", "device=first", "maxPinned=0", "allowGids=[]",
            "metrics=off", "failNth=0", "registrationLatencyMicros=0", "ibverbsLibrary=libibverbs.so.1",
            "journalSize=64MiB", "fromEnvironment=[MRD_HEARTBEAT_INTERVAL_MS]"))
        {
            assertTrue(text.contains(field), text + " should contain " + field);
        }
    }

    private static Map<String, String> env(final Row row, final String text)
    {
        return Map.of(row.setting().variable(), text);
    }
}
