package io.mrd.cli;

import io.mrd.cli.fixture.DaemonExtension;
import io.mrd.cli.fixture.MrdRunner;
import io.mrd.cli.fixture.MrdRunner.Result;
import io.mrd.layout.ControlFile;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.sys.Sizes;
import io.mrd.primary.DaemonContext;
import io.mrd.testing.Equipment;
import io.mrd.tools.RunDirectoryReader;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Every option of every command, given a wrong value (wrong type, negative, zero, huge, empty, a path that is a
 * file, a directory, missing, or not readable): the command exits 2 when the command line is wrong by itself and
 * 1 when a well-formed command fails, with exactly one line on stderr, {@code mrd COMMAND: ERRNO: …}, that names
 * the value and says what to do, and no Java class name in it; and it starts nothing it was not asked to: no
 * daemon (no lock held, no control file, no process left), no client of the running daemon.
 * <p>
 * One table per way of running: in this JVM (most of it), as a process of its own (exit status, {@code MRD_*}
 * variables, {@code --foreground}), and as another user (nobody, via setpriv, which needs root) against a daemon
 * whose directory that user may not read. Paths in the tables are placeholders: {@code {live}} the run directory
 * of the daemon this class starts, {@code {fresh}} a new directory per row, {@code {file}} an empty regular file,
 * {@code {junk}} 8 KiB that are not a control file, {@code {junkjournal}} and {@code {shortjournal}} directories
 * whose {@code 0.journal} is 8 KiB that are not a journal and 100 bytes, {@code {missing}} nothing, {@code {base}} a directory,
 * {@code {busyport}} a port something listens on already.
 */
final class CommandLineErrorsTest
{
    private static final int NOBODY = 65534;
    private static final AtomicInteger FRESH = new AtomicInteger();
    /** What a failure line starts with: the command, then the errno. */
    private static final Pattern ONE_LINE = Pattern.compile("^mrd( [a-z]+)?: E[A-Z]+: \\S");

    /** The class's directories and its daemon, and any daemon a failed row left in a directory below them. */
    @RegisterExtension
    static final DaemonExtension DAEMONS = new DaemonExtension();

    private static Path base;
    private static Path live;
    private static long livePid;
    private static Set<Long> processesBefore;
    private static String otherUserClassPath;
    /** A port something listens on already, for a daemon that cannot serve its metrics. */
    private static ServerSocket busy;

    /** Where a row's one line goes: stderr, but for the answer of {@code mrd status}. */
    enum Stream
    {
        ERR, OUT
    }

    /**
     * @param args      the command line, with placeholders.
     * @param env       variables added to a process's environment (process rows only).
     * @param exit      the exit code.
     * @param pattern   a regular expression the one line must contain, placeholders quoted.
     * @param stream    where the line goes.
     * @param liveMode  the mode of {@code {live}} for the row (other-user rows only), or null.
     */
    record Row(List<String> args, Map<String, String> env, int exit, String pattern, Stream stream, String liveMode)
    {
        public String toString()
        {
            return (env.isEmpty() ? "" : env.entrySet().stream().map(e -> e.getKey() + "=" + e.getValue())
                .collect(Collectors.joining(" ", "", " "))) + "mrd " + args.stream()
                .map(a -> a.isEmpty() ? "''" : a).collect(Collectors.joining(" ")) +
                (null == liveMode ? "" : " (dir " + liveMode + ")") + " -> " + exit;
        }
    }

    private static Row row(final int exit, final String pattern, final String... args)
    {
        return new Row(List.of(args), Map.of(), exit, pattern, Stream.ERR, null);
    }

    private static Row row(final int exit, final String pattern, final List<String> args)
    {
        return new Row(args, Map.of(), exit, pattern, Stream.ERR, null);
    }

    private static List<String> start(final String... args)
    {
        final List<String> line = new ArrayList<>(List.of("start", "--dir", "{fresh}"));
        line.addAll(List.of(args));
        return line;
    }

    private static List<String> worker(final String... args)
    {
        final List<String> line = new ArrayList<>(List.of("worker", "--dir", "{live}", "--alloc", "4MiB"));
        line.addAll(List.of(args));
        return line;
    }

    // ---------------------------------------------------------------------------------------------------------

    static List<Row> inProcessRows()
    {
        final List<Row> rows = new ArrayList<>(List.of(
            row(2, "^mrd: EINVAL: no command given: give one of start, stop, restart, status"),
            row(2, "^mrd: EINVAL: Unmatched argument .*'nosuch'", "nosuch"),
            row(2, "^mrd: EINVAL: Unknown option: '--nosuch'", "--nosuch"),
            row(2, "^mrd: EINVAL: Unknown subcommand 'nosuch'", "help", "nosuch"),

            row(2, "--log-level.* but was 'LOUD'", start("--log-level", "LOUD")),
            row(2, "--log-level.* but was ''", start("--log-level", "")),
            row(2, "--allow-gid -1 is negative: give a group id", start("--allow-gid", "-1")),
            row(2, "--allow-gid' \\(GID\\): 'abc' is not a group id", start("--allow-gid", "abc")),
            row(2, "--allow-gid' \\(GID\\): '4294967296' is not a group id", start("--allow-gid", "4294967296")),
            row(2, "--dir': path '' is empty", start("--dir", "")),
            row(1, "ENOTDIR: cannot use run directory {file}: {file} is not a directory", start("--dir", "{file}")),
            row(1, "ENOTDIR: cannot create run directory {file}/sub: {file} is not a directory",
                start("--dir", "{file}/sub")),
            row(1, "EBUSY: a daemon is already running in {live} \\(pid \\d+\\)", start("--dir", "{live}")),
            row(2, "--max-memory': size 'abc' is not a size", start("--max-memory", "abc")),
            row(2, "--max-memory': size '-1' is not a size", start("--max-memory", "-1")),
            row(2, "--max-memory': size '' is not a size", start("--max-memory", "")),
            row(2, "--max-memory 0B must be a positive multiple of 2MiB", start("--max-memory", "0")),
            row(2, "--max-memory 3MiB must be a positive multiple of 2MiB", start("--max-memory", "3MiB")),
            row(2, "size '99999999999TiB' does not fit in 64 bits", start("--max-memory", "99999999999TiB")),
            row(2, "gives 2048 lists, more than 64: raise --list-size", start("--max-memory", "1TiB")),
            row(2, "Missing required parameter for option '--max-memory'", start("--max-memory")),
            row(2, "--list-size 0B must be a positive multiple", start("--list-size", "0")),
            row(2, "--list-size 1MiB must be a positive multiple", start("--list-size", "1MiB")),
            row(2, "--max-external': size '-1' is not a size", start("--max-external", "-1")),
            row(2, "--max-external 1MiB must be a multiple of 2MiB", start("--max-external", "1MiB")),
            row(2, "--base-virtaddr 0x1234 must be a multiple of 1GiB", start("--base-virtaddr", "0x1234")),
            row(2, "--base-virtaddr 0x0 must be a multiple of 1GiB", start("--base-virtaddr", "0")),
            row(2, "--base-virtaddr': address '-1' is negative", start("--base-virtaddr", "-1")),
            row(2, "--base-virtaddr': address 'abc' is not a number", start("--base-virtaddr", "abc")),
            row(2, "--base-virtaddr 0x7f0000000000 must be a multiple of 1GiB below",
                start("--base-virtaddr", Sizes.hex(DaemonContext.ADDRESS_SPACE_END))),
            row(2, "memory from --base-virtaddr 0x7effc0000000 would reach",
                start("--base-virtaddr", Sizes.hex(DaemonContext.ADDRESS_SPACE_END - Sizes.GIB))),
            row(2, "--max-mrs 0 must be between 1 and 1048576", start("--max-mrs", "0")),
            row(2, "--max-mrs 1048577 must be between 1 and 1048576", start("--max-mrs", "1048577")),
            row(2, "--max-mrs': 'abc' is not a number", start("--max-mrs", "abc")),
            row(2, "--cache-capacity 1 must be between 2 and", start("--cache-capacity", "1")),
            row(2, "--cache-capacity 67108865 must be between 2 and 67108864", start("--cache-capacity", "67108865")),
            row(2, "control file would be \\d+ bytes, over the 2 GiB limit",
                start("--cache-capacity", "67108864", "--max-mrs", "1048576", "--max-memory", "32GiB",
                    "--list-size", "16GiB")),
            row(2, "--max-clients 0 must be between 1 and 65536", start("--max-clients", "0")),
            row(2, "--max-clients 65537 must be between 1 and 65536", start("--max-clients", "65537")),
            row(2, "--worker-threads 0 must be between 1 and 256", start("--worker-threads", "0")),
            row(2, "--worker-threads 257 must be between 1 and 256", start("--worker-threads", "257")),
            row(2, "--populate-threads 0 must be between 1 and 64", start("--populate-threads", "0")),
            row(2, "--populate-threads -1 must be between 1 and 64", start("--populate-threads", "-1")),
            row(2, "--populate-threads 65 must be between 1 and 64", start("--populate-threads", "65")),
            row(2, "--populate-threads': '4294967296' is not a number", start("--populate-threads", "4294967296")),
            row(2, "--populate-threads': 'two' is not a number", start("--populate-threads", "two")),
            row(2, "--heartbeat-interval 9 ms must be between 10 and 10000", start("--heartbeat-interval", "9")),
            row(2, "--heartbeat-interval 10001 ms must be between", start("--heartbeat-interval", "10001")),
            row(2, "--heartbeat-interval': 'abc' is not a number of milliseconds",
                start("--heartbeat-interval", "abc")),
            row(2, "unknown provider 'nosuch': --provider takes one of", start("--provider", "nosuch")),
            row(2, "unknown provider '': --provider takes one of", start("--provider", "")),
            row(2, "--device': '' is not a device name", start("--device", "")),
            row(2, "--max-pinned': size '-1' is not a size", start("--max-pinned", "-1")),
            row(2, "--mr-ext-memseg': 'maybe' is not true or false", start("--mr-ext-memseg=maybe")),
            row(2, "--metrics': '' is not HOST:PORT", start("--metrics", "")),
            row(2, "--metrics': 'abc' is not HOST:PORT", start("--metrics", "abc")),
            row(2, "--metrics': '127.0.0.1:65536' is not HOST:PORT", start("--metrics", "127.0.0.1:65536")),
            row(2, "--metrics': 'nosuch.invalid:9464' is not HOST:PORT with a host that resolves",
                start("--metrics", "nosuch.invalid:9464")),
            row(1, "^mrd start: EBUSY: the daemon exited with status 1 while starting: cannot serve metrics on " +
                "127\\.0\\.0\\.1:\\d+: Address already in use", start("--metrics", "127.0.0.1:{busyport}")),
            row(2, "--huge-dir': '' is not a hugetlbfs mount", start("--huge-dir", "")),
            row(1, "ENOTDIR: cannot use --huge-dir {file}: {file} is not a directory: give the mount point",
                start("--huge-dir", "{file}")),
            row(1, "ENOENT: cannot use --huge-dir {missing}: No such file or directory: give the mount point",
                start("--huge-dir", "{missing}")),
            row(1, "EINVAL: --huge-dir {base} is not on a hugetlbfs mount", start("--huge-dir", "{base}")),
            row(2, "--fail-nth -1 is negative", start("--fail-nth", "-1")),
            row(2, "--fail-nth': 'abc' is not a number", start("--fail-nth", "abc")),
            row(2, "--registration-latency -1 must be between 0 and 10000000 microseconds",
                start("--registration-latency", "-1")),
            row(2, "--registration-latency 10000001 must be between 0 and 10000000",
                start("--registration-latency", "10000001")),
            row(2, "--registration-latency 9223372036854775807 must be between 0 and 10000000",
                start("--registration-latency", Long.toString(Long.MAX_VALUE))),
            row(2, "Unmatched argument .*'extra'", start("extra")),
            row(2, "Unknown option: '--nosuch'", start("--nosuch")),

            row(2, "--timeout 0 must be between 1 and 86400", "stop", "--dir", "{live}", "--timeout", "0"),
            row(2, "--timeout -1 must be between 1 and 86400", "stop", "--dir", "{live}", "--timeout", "-1"),
            row(2, "--timeout 86401 must be between 1 and 86400", "stop", "--dir", "{live}", "--timeout", "86401"),
            row(2, "--timeout': 'abc' is not an int", "stop", "--dir", "{live}", "--timeout", "abc"),
            row(2, "Unmatched argument .*'extra'", "stop", "--dir", "{live}", "extra"),
            row(2, "--dir': path '' is empty", "stop", "--dir", ""),
            row(1, "ENOTDIR: cannot use run directory {file}: {file} is not a directory", "stop", "--dir", "{file}"),
            row(1, "ESRCH: no daemon running in {missing}", "stop", "--dir", "{missing}"),

            // restart checks its own options before it asks any daemon to hand over (never {live}'s)
            row(2, "--timeout 0 must be between 1 and 86400", "restart", "--dir", "{live}", "--timeout", "0"),
            row(1, "ESRCH: no daemon running in {missing} to hand over", "restart", "--dir", "{missing}"),
            row(2, "--take-over-timeout 0 must be between 1 and 86400", "start", "--dir", "{live}", "--take-over",
                "--take-over-timeout", "0"),
            row(1, "ESRCH: no daemon running in {missing} to hand over", "start", "--dir", "{missing}",
                "--take-over"),

            row(2, "--dir': path '' is empty", "status", "--dir", ""),
            row(1, "ENOTDIR: cannot use run directory {file}: {file} is not a directory", "status", "--dir", "{file}"),
            row(2, "Unmatched argument .*'extra'", "status", "--dir", "{live}", "extra"),
            new Row(List.of("status", "--dir", "{missing}"), Map.of(), 1, "^mrd not running in {missing}$",
                Stream.OUT, null),

            row(2, "--map draws text and --json prints data: choose one", "dump", "--dir", "{live}", "--json", "--map"),
            row(2, "--watch 0.0 must be between 0.01 and 86400", "stat", "--dir", "{live}", "--watch", "0"),
            row(2, "--watch -1.0 must be between", "stat", "--dir", "{live}", "--watch", "-1"),
            row(2, "--watch 0.001 must be between", "stat", "--dir", "{live}", "--watch", "0.001"),
            row(2, "--watch 86401.0 must be between", "stat", "--dir", "{live}", "--watch", "86401"),
            row(2, "--watch NaN must be between", "stat", "--dir", "{live}", "--watch", "NaN"),
            row(2, "--watch Infinity must be between", "stat", "--dir", "{live}", "--watch", "Infinity"),
            row(2, "--watch': 'abc' is not a double", "stat", "--dir", "{live}", "--watch", "abc"),
            row(2, "--count takes at least 1, not 0", "stat", "--dir", "{live}", "--count", "0"),
            row(2, "--count takes at least 1, not -1", "stat", "--dir", "{live}", "--count", "-1"),
            row(2, "--count': 'abc' is not an int", "stat", "--dir", "{live}", "--count", "abc"),
            row(2, "Missing required parameter: 'ADDR'", "lookup", "--dir", "{live}"),
            row(2, "address 'abc' is not a number", "lookup", "--dir", "{live}", "abc"),
            row(2, "address '' is not a number", "lookup", "--dir", "{live}", ""),
            row(2, "address '-1' is negative", "lookup", "--dir", "{live}", "-1"),
            row(2, "address '0x1ffffffffffffffff' is not a number", "lookup", "--dir", "{live}", "0x1ffffffffffffffff"),
            row(2, "Unmatched argument .*'0x2'", "lookup", "--dir", "{live}", "0x1", "0x2"),

            row(2, "Missing required option: '--alloc=SIZE'", "worker", "--dir", "{live}"),
            row(2, "--alloc': size 'abc' is not a size", "worker", "--dir", "{live}", "--alloc", "abc"),
            row(2, "--alloc': size '-1' is not a size", "worker", "--dir", "{live}", "--alloc", "-1"),
            row(2, "--alloc': size '' is not a size", "worker", "--dir", "{live}", "--alloc", ""),
            row(2, "--alloc 0B must be between 1 byte and 64TiB", "worker", "--dir", "{live}", "--alloc", "0"),
            row(2, "--alloc 100TiB must be between 1 byte and 64TiB", "worker", "--dir", "{live}", "--alloc", "100TiB"),
            row(2, "--buffers 0 must be at least 1", worker("--buffers", "0")),
            row(2, "--buffers -1 must be at least 1", worker("--buffers", "-1")),
            row(2, "--buffers': '2147483648' is not an int", worker("--buffers", "2147483648")),
            row(2, "--buffers 1000000 is too many for --alloc 2MiB",
                "worker", "--dir", "{live}", "--alloc", "2MiB", "--buffers", "1000000"),
            row(2, "--lookups -1 must not be negative", worker("--lookups", "-1")),
            row(2, "--lookups': 'abc' is not a long", worker("--lookups", "abc")),
            row(2, "--threads 0 must be between 1 and 1024", worker("--threads", "0")),
            row(2, "--threads -1 must be between 1 and 1024", worker("--threads", "-1")),
            row(2, "--threads 1025 must be between 1 and 1024", worker("--threads", "1025")),
            row(2, "--threads': 'abc' is not an int", worker("--threads", "abc")),
            row(2, "--free-every -1 must not be negative \\(0: never\\)", worker("--free-every", "-1")),
            row(2, "--verify-every 0 must be at least 1", worker("--verify-every", "0")),
            row(2, "--warmup -1 must not be negative", worker("--warmup", "-1")),
            row(2, "--start-at -1 must be between 0 and an hour from now", worker("--start-at", "-1")),
            row(2, "--start-at 99999999999999 must be between 0 and an hour from now",
                worker("--start-at", "99999999999999")),
            row(2, "--name '' must be 1 to 32 bytes", worker("--name", "")),
            row(2, "--name '" + "x".repeat(33) + "' must be 1 to 32 bytes", worker("--name", "x".repeat(33))),
            row(2, "--seed': 'abc' is not a long", worker("--seed", "abc")),
            row(2, "--rdma-peer b needs --name", worker("--rdma-peer", "b")),
            row(2, "--rdma-peer 'a' is this worker's own --name", worker("--name", "a", "--rdma-peer", "a")),
            row(2, "--rdma-peer '' must be 1 to 32 bytes", worker("--name", "a", "--rdma-peer", "")),
            row(2, "--rdma-seconds 0 must be between 1 and 3600", worker("--name", "a", "--rdma-peer", "b",
                "--rdma-seconds", "0")),
            row(2, "--rdma-seconds 3601 must be between 1 and 3600", worker("--name", "a", "--rdma-peer", "b",
                "--rdma-seconds", "3601")),
            row(2, "--rdma-seconds': 'abc' is not a long", worker("--name", "a", "--rdma-peer", "b",
                "--rdma-seconds", "abc")),
            row(2, "--rdma-exchange': path '' is empty", worker("--name", "a", "--rdma-peer", "b",
                "--rdma-exchange", "")),
            row(2, "--dir': path '' is empty", "worker", "--dir", "", "--alloc", "4MiB"),
            row(1, "ECONNREFUSED: no daemon running in {missing}", "worker", "--dir", "{missing}", "--alloc", "4MiB"),
            row(1, "ENOTDIR: cannot read control file {file}/mrd.ctl: {file} is not a directory",
                "worker", "--dir", "{file}", "--alloc", "4MiB"),

            row(2, "--since 'yesterday' is not a time: give an ISO-8601 instant",
                "events", "--dir", "{live}", "--since", "yesterday"),
            row(2, "--since '' is not a time", "events", "--dir", "{live}", "--since", ""),
            row(2, "--since '2026-13-01T00:00:00Z' is not a time",
                "events", "--dir", "{live}", "--since", "2026-13-01T00:00:00Z"),
            row(2, "--since '99999999999999999999d' is not a time",
                "events", "--dir", "{live}", "--since", "99999999999999999999d"),
            row(2, "--since '-5m' is not a time", "events", "--dir", "{live}", "--since", "-5m"),
            row(2, "Missing required parameter for option '--since'", "events", "--dir", "{live}", "--since"),
            row(2, "--client 0 is not a client id: give a positive id", "events", "--dir", "{live}", "--client", "0"),
            row(2, "--client -3 is not a client id", "events", "--dir", "{live}", "--client", "-3"),
            row(2, "--client': 'abc' is not an int", "events", "--dir", "{live}", "--client", "abc"),
            row(2, "--client': '4294967296' is not an int", "events", "--dir", "{live}", "--client", "4294967296"),
            row(2, "--dir': path '' is empty", "events", "--dir", ""),
            row(1, "^mrd events: ENOENT: no run directory {missing}: give the run directory of a daemon with --dir",
                "events", "--dir", "{missing}"),
            row(1, "^mrd events: ENOTDIR: cannot use run directory {file}: {file} is not a directory: give the run",
                "events", "--dir", "{file}"),
            row(1, "ENOTDIR: cannot use run directory {file}/sub: {file} is not a directory",
                "events", "--dir", "{file}/sub"),
            row(1, "ENOENT: no journal in {base}/journal: the daemon there ran with --journal-size 0 or never ran",
                "events", "--dir", "{base}"),
            row(1, "ENOENT: no journal in {live}/journal\\.previous: ", "events", "--dir", "{live}", "--previous"),
            row(2, "--journal': path '' is empty", "events", "--journal", ""),
            row(1, "ENOENT: no journal in {missing}: ", "events", "--journal", "{missing}"),
            row(1, "ENOENT: no journal in {live}: ", "events", "--journal", "{live}"),
            row(1, "ENOTDIR: cannot read the journal {file}: {file} is not a directory: give a journal directory",
                "events", "--journal", "{file}"),
            row(1, "EINVAL: {junkjournal}/0\\.journal is not an mrd journal file \\(magic 5a5a5a5a\\): give a " +
                "journal directory such as DIR/journal", "events", "--journal", "{junkjournal}"),
            row(1, "EINVAL: {shortjournal}/0\\.journal is not an mrd journal file \\(100 bytes\\)",
                "events", "--journal", "{shortjournal}"),
            row(2, "--previous and --journal name two journals: give one of them",
                "events", "--dir", "{live}", "--previous", "--journal", "{live}/journal"),
            row(2, "Unknown option: '--nosuch'", "events", "--dir", "{live}", "--nosuch"),
            row(2, "Unmatched argument .*'extra'", "events", "--dir", "{live}", "extra"),
            row(2, "--follow': 'maybe' is not a boolean", "events", "--dir", "{live}", "--follow=maybe"),

            row(2, "--lookups 0 must be between 1 and 1000000000", "demo", "--lookups", "0"),
            row(2, "--lookups -1 must be between 1 and 1000000000", "demo", "--lookups", "-1"),
            row(2, "--lookups 1000000001 must be between 1 and", "demo", "--lookups", "1000000001"),
            row(2, "--lookups': 'abc' is not a long", "demo", "--lookups", "abc"),
            row(2, "Unmatched argument .*'extra'", "demo", "extra")));

        // The commands that read a control file share --dir and --file: every wrong path, for each.
        for (final List<String> command : List.of(List.of("dump"), List.of("stat"), List.of("check"),
            List.of("lookup", "0x1000")))
        {
            rows.add(row(1, "ENOTDIR: cannot read control file {file}/mrd.ctl: {file} is not a directory",
                with(command, "--dir", "{file}")));
            rows.add(row(1, "ENOENT: no control file at {missing}/mrd.ctl: is a daemon running there\\? start one",
                with(command, "--dir", "{missing}")));
            rows.add(row(2, "--dir': path '' is empty", with(command, "--dir", "")));
            rows.add(row(2, "--file': path '' is empty", with(command, "--file", "")));
            rows.add(row(1, "EISDIR: {base} is a directory, not a control file", with(command, "--file", "{base}")));
            rows.add(row(1, "ENOENT: no file at {missing}: --file takes the path of a control file",
                with(command, "--file", "{missing}")));
            rows.add(row(1, "EINVAL: /dev/null is not a regular file", with(command, "--file", "/dev/null")));
            rows.add(row(1, "EAGAIN: control file {file} is 0 bytes, shorter than its header",
                with(command, "--file", "{file}")));
            rows.add(row(1, "EPROTO: {junk} is not an mrd control file", with(command, "--file", "{junk}")));
            rows.add(row(2, "--dir {live} and --file {junk} both name a control file: give one",
                with(command, "--dir", "{live}", "--file", "{junk}")));
        }
        return rows;
    }

    private static List<String> with(final List<String> command, final String... args)
    {
        final List<String> line = new ArrayList<>(command.subList(0, 1));
        line.addAll(List.of(args));
        line.addAll(command.subList(1, command.size()));
        return line;
    }

    /**
     * What only a process of its own shows: the exit status of main, the {@code MRD_*} variables, the log level
     * chosen before the command line is parsed, and {@code --foreground} (which in this JVM would run a daemon).
     */
    static List<Row> processRows()
    {
        return List.of(
            new Row(List.of(), Map.of(), 2, "^mrd: EINVAL: no command given", Stream.ERR, null),
            new Row(start("--log-level", "LOUD"), Map.of(), 2, "but was 'LOUD'", Stream.ERR, null),
            new Row(start(), Map.of("MRD_MAX_MEMORY", "lots"), 2, "EINVAL: MRD_MAX_MEMORY='lots' is not a size",
                Stream.ERR, null),
            new Row(start(), Map.of("MRD_ALLOW_GID", "7,-1"), 2, "--allow-gid -1 is negative.* MRD_ALLOW_GID",
                Stream.ERR, null),
            new Row(start(), Map.of("MRD_HEARTBEAT_INTERVAL_MS", "1"), 2,
                "--heartbeat-interval 1 ms must be between 10 and 10000 \\(--heartbeat-interval from MRD_HEARTBEAT_INTERVAL_MS", Stream.ERR,
                null),
            new Row(start(), Map.of("MRD_REGISTRATION_LATENCY", "9223372036854775807"), 2,
                "--registration-latency 9223372036854775807 must be between 0 and 10000000 microseconds " +
                "\\(--registration-latency from MRD_REGISTRATION_LATENCY\\)", Stream.ERR, null),
            new Row(List.of("start"), Map.of("MRD_DIR", "{file}"), 1, "ENOTDIR: cannot use run directory {file}",
                Stream.ERR, null),
            new Row(List.of("status"), Map.of("MRD_DIR", "{file}"), 1, "ENOTDIR: cannot use run directory {file}",
                Stream.ERR, null),
            new Row(start("--foreground", "--huge-dir", "{file}"), Map.of(), 1, "ENOTDIR: cannot use --huge-dir {file}",
                Stream.ERR, null),
            new Row(start("--foreground", "--max-memory", "3MiB"), Map.of(), 2, "--max-memory 3MiB must be",
                Stream.ERR, null),
            new Row(start("--foreground", "--dir", "{file}"), Map.of(), 1, "ENOTDIR: cannot use run directory {file}",
                Stream.ERR, null));
    }

    /**
     * Another user, against the running daemon: never "no daemon running", always EACCES naming what denies
     * access (the directory at mode 0700, the file itself at 0755) and who may.
     */
    static List<Row> otherUserRows()
    {
        final String denied = "EACCES: cannot read (the lock|control file) {live}/mrd\\.(lock|ctl): Permission " +
            "denied by {live}%s \\(owner uid \\d+, group gid \\d+, mode %s\\): run as the daemon's user";
        final List<Row> rows = new ArrayList<>();
        for (final List<String> command : List.of(List.of("stop"), List.of("status"), List.of("dump"),
            List.of("stat"), List.of("check"), List.of("lookup", "0x1000"), List.of("worker", "--alloc", "4MiB"),
            List.of("start")))
        {
            final List<String> args = with(command, "--dir", "{live}");
            rows.add(new Row(args, Map.of(), 1, String.format(denied, "", "0700"), Stream.ERR, "rwx------"));
            rows.add(new Row(args, Map.of(), 1, String.format(denied, "/mrd\\.(lock|ctl)", "0640"), Stream.ERR,
                "rwxr-xr-x"));
        }
        // The journal names every client's ranges and keys: its directory is 0750 as the run directory's files.
        final String journalDenied = "EACCES: cannot read the journal file {live}/journal/0\\.journal: Permission " +
            "denied by {live}%s \\(owner uid \\d+, group gid \\d+, mode %s\\): run as the daemon's user";
        final List<String> events = List.of("events", "--dir", "{live}");
        rows.add(new Row(events, Map.of(), 1, String.format(journalDenied, "", "0700"), Stream.ERR, "rwx------"));
        rows.add(new Row(events, Map.of(), 1, String.format(journalDenied, "/journal", "0750"), Stream.ERR,
            "rwxr-xr-x"));
        return rows;
    }

    // ---------------------------------------------------------------------------------------------------------

    @BeforeAll
    static void startDaemon() throws IOException
    {
        base = DAEMONS.newDirectory("cli-errors");
        Files.setPosixFilePermissions(base, PosixFilePermissions.fromString("rwxr-xr-x"));
        Files.createFile(base.resolve("file"));
        final byte[] junk = new byte[8192];
        Arrays.fill(junk, (byte)0x5a);
        Files.write(base.resolve("junk.ctl"), junk);
        Files.write(Files.createDirectory(base.resolve("junk-journal")).resolve("0.journal"), junk);
        Files.write(Files.createDirectory(base.resolve("short-journal")).resolve("0.journal"), new byte[100]);
        live = base.resolve("live");
        Files.createDirectory(live, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
        busy = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
        processesBefore = descendants();
        final Result started = MrdRunner.mrd("start", "--dir", live.toString(), "--huge-dir", "none",
            "--max-memory", "64MiB", "--list-size", "32MiB");
        assertEquals(0, started.exit(), started::toString);
        try (ControlFile ctl = ControlFile.openReadOnly(live.resolve(ControlFile.FILE_NAME)))
        {
            livePid = ctl.header().pid();
        }
    }

    @AfterAll
    static void stopDaemon()
    {
        try
        {
            if (null != live)
            {
                setLiveMode("rwx------");
                final Result stopped = MrdRunner.mrd("stop", "--dir", live.toString());
                assertEquals(0, stopped.exit(), stopped::toString);
            }
        }
        finally
        {
            closeQuietly(busy);
        }
    }

    @AfterEach
    void killWhatTheRowStarted()
    {
        // Only when a row failed: whatever it started must not outlive it, neither a process of this JVM's nor a
        // daemon that a process row's 'mrd start' detached (its parent is init by now; its lock names it).
        for (final long pid : newProcesses())
        {
            ProcessHandle.of(pid).ifPresent(ProcessHandle::destroyForcibly);
        }
        DaemonExtension.killLeftovers(base.resolve("fresh-" + FRESH.get()));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("inProcessRows")
    void inThisJvm(final Row row)
    {
        final Path fresh = fresh();
        final Result run = MrdRunner.mrd(expand(row.args(), fresh).toArray(String[]::new));
        assertOneLine(row, run, fresh);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("processRows")
    void asAProcess(final Row row)
    {
        final Path fresh = fresh();
        final Map<String, String> env = row.env().entrySet().stream().collect(Collectors.toMap(Map.Entry::getKey,
            e -> expand(List.of(e.getValue()), fresh).getFirst()));
        assertOneLine(row, MrdRunner.mrdProcess(List.of(), System.getProperty("java.class.path"), env,
            expand(row.args(), fresh)), fresh);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("otherUserRows")
    void asAnotherUser(final Row row) throws IOException
    {
        Equipment.root("run a command as another uid");
        final Path setprivProgram = Equipment.systemProgram("setpriv");
        final Path fresh = fresh();
        setLiveMode(row.liveMode());
        try
        {
            final List<String> setpriv = List.of(setprivProgram.toString(), "--reuid", String.valueOf(NOBODY),
                "--regid", String.valueOf(NOBODY), "--clear-groups");
            assertOneLine(row, MrdRunner.mrdProcess(setpriv, otherUserClassPath(), Map.of(), expand(row.args(), fresh)),
                fresh);
        }
        finally
        {
            setLiveMode("rwx------");
        }
    }

    // ---------------------------------------------------------------------------------------------------------

    private static void assertOneLine(final Row row, final Result run, final Path fresh)
    {
        assertEquals(row.exit(), run.exit(), run::toString);
        final String stream = row.stream() == Stream.ERR ? run.err() : run.out();
        final String other = row.stream() == Stream.ERR ? run.out() : run.err();
        final List<String> lines = stream.lines().filter(l -> !l.isBlank()).toList();
        assertEquals(1, lines.size(), () -> "exactly one line on std" + row.stream().name().toLowerCase() + ": " + run);
        assertTrue(other.isBlank(), () -> "nothing on the other stream: " + run);
        final String line = lines.getFirst();
        System.out.println("LINE " + row + ": " + line);
        assertFalse(line.contains("Exception") || line.contains("java."), "no Java class name: " + line);
        if (row.stream() == Stream.ERR)
        {
            assertTrue(ONE_LINE.matcher(line).find(), "'mrd COMMAND: ERRNO: ...': " + line);
        }
        final String pattern = expandPattern(row.pattern(), fresh);
        assertTrue(Pattern.compile(pattern).matcher(line).find(), () -> line + "\nshould contain /" + pattern + "/");

        // It started nothing: no daemon in its directory, no process, no client of the running daemon.
        if (Files.isDirectory(fresh))
        {
            assertFalse(Files.exists(fresh.resolve(ControlFile.FILE_NAME)), "no control file in " + fresh);
            assertFalse(RunDirectoryReader.isLocked(fresh), "no lock held in " + fresh);
        }
        assertEquals(Set.of(), newProcesses(), "no process left");
        assertTrue(ProcessHandle.of(livePid).map(ProcessHandle::isAlive).orElse(false), "the daemon still runs");
        try (ControlFile ctl = ControlFile.openReadOnly(live.resolve(ControlFile.FILE_NAME)))
        {
            assertEquals(0, ctl.counter(MrdCounter.CLIENTS_TOTAL), "no client attached to the running daemon");
            assertEquals(livePid, ctl.header().pid());
        }
    }

    private static void closeQuietly(final ServerSocket socket)
    {
        try
        {
            if (null != socket)
            {
                socket.close();
            }
        }
        catch (final IOException ignored)
        {
            // the port is the kernel's again when this JVM exits
        }
    }

    private static Path fresh()
    {
        return base.resolve("fresh-" + FRESH.incrementAndGet());
    }

    private static List<String> expand(final List<String> args, final Path fresh)
    {
        return args.stream().map(a -> a
            .replace("{live}", live.toString())
            .replace("{fresh}", fresh.toString())
            .replace("{file}", base.resolve("file").toString())
            .replace("{junkjournal}", base.resolve("junk-journal").toString())
            .replace("{shortjournal}", base.resolve("short-journal").toString())
            .replace("{junk}", base.resolve("junk.ctl").toString())
            .replace("{missing}", base.resolve("missing").toString())
            .replace("{base}", base.toString())
            .replace("{busyport}", Integer.toString(busy.getLocalPort()))).toList();
    }

    private static String expandPattern(final String pattern, final Path fresh)
    {
        return pattern
            .replace("{live}", Pattern.quote(live.toString()))
            .replace("{fresh}", Pattern.quote(fresh.toString()))
            .replace("{file}", Pattern.quote(base.resolve("file").toString()))
            .replace("{junkjournal}", Pattern.quote(base.resolve("junk-journal").toString()))
            .replace("{shortjournal}", Pattern.quote(base.resolve("short-journal").toString()))
            .replace("{junk}", Pattern.quote(base.resolve("junk.ctl").toString()))
            .replace("{missing}", Pattern.quote(base.resolve("missing").toString()))
            .replace("{base}", Pattern.quote(base.toString()));
    }

    private static void setLiveMode(final String mode)
    {
        try
        {
            Files.setPosixFilePermissions(live, PosixFilePermissions.fromString(mode));
        }
        catch (final IOException ex)
        {
            throw new AssertionError("cannot chmod " + live, ex);
        }
    }

    private static Set<Long> descendants()
    {
        return ProcessHandle.current().descendants().filter(ProcessHandle::isAlive).map(ProcessHandle::pid)
            .collect(Collectors.toSet());
    }

    private static Set<Long> newProcesses()
    {
        final Set<Long> now = new HashSet<>(descendants());
        now.removeAll(processesBefore);
        now.remove(livePid);
        // the running daemon's descriptor holder is its child
        ProcessHandle.of(livePid).ifPresent(daemon -> daemon.descendants().map(ProcessHandle::pid).forEach(now::remove));
        return now;
    }

    /**
     * @return this JVM's class path, readable by nobody: entries under a directory others may not enter (the
     * Maven repository in root's home) are copied below {@code base} once.
     */
    private static synchronized String otherUserClassPath() throws IOException
    {
        if (null == otherUserClassPath)
        {
            final Path copies = Files.createDirectory(base.resolve("classpath"));
            final List<String> entries = new ArrayList<>();
            int i = 0;
            for (final String entry : System.getProperty("java.class.path").split(java.io.File.pathSeparator))
            {
                final Path path = Path.of(entry).toAbsolutePath();
                if (!Files.isRegularFile(path) || readableByOthers(path))
                {
                    entries.add(entry);
                    continue;
                }
                final Path copy = copies.resolve(i++ + "-" + path.getFileName());
                Files.copy(path, copy);
                Files.setPosixFilePermissions(copy, PosixFilePermissions.fromString("rw-r--r--"));
                entries.add(copy.toString());
            }
            otherUserClassPath = String.join(java.io.File.pathSeparator, entries);
        }
        return otherUserClassPath;
    }

    private static boolean readableByOthers(final Path file) throws IOException
    {
        if (!PosixFilePermissions.toString(Files.getPosixFilePermissions(file)).substring(6).startsWith("r"))
        {
            return false;
        }
        for (Path dir = file.getParent(); null != dir; dir = dir.getParent())
        {
            if (!PosixFilePermissions.toString(Files.getPosixFilePermissions(dir)).endsWith("x"))
            {
                return false;
            }
        }
        return true;
    }
}
