package io.mrd.cli.secondaries;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Sizes;
import io.mrd.secondary.ClientContext;
import io.mrd.secondary.MrCache;
import io.mrd.secondary.MrdClient;

import java.io.IOException;
import java.io.PrintStream;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * A secondary process for integration tests: a {@code main} that a {@link io.mrd.testing.ChildJvm} runs,
 * doing what its arguments say against a real daemon and printing one result line per command.
 * <pre>
 * SecondaryDriver DIR COMMAND...        each COMMAND is one argument, its words separated by spaces
 * </pre>
 * Commands run in order; a failed command is a result (an {@code ERR} line), not the end of the run, because
 * most tests are about the failures. Any command may end with {@code #LABEL}, which names its result line
 * (default: its 1-based position). Sizes and offsets are {@code 4096}, {@code 2MiB} or {@code 0x…}.
 * <pre>
 * attach [name=N] [timeout=MS]   MrdClient.attach(DIR), request timeout MS
 * alloc NAME SIZE                client.allocate; NAME is then the segment          → addr= len=
 * free NAME                      client.free of an allocation of this process
 * publish NAME FILE              write "ADDR LEN" of NAME to FILE (atomically)
 * import NAME FILE [MS]          wait (default 60 s) for FILE, define NAME from it (for lookups; not mapped)
 * write NAME OFFSET VALUE        store a long into NAME's memory
 * read NAME OFFSET               load a long from NAME's memory                     → value=
 * lkey ADDR LEN                  lookup through this process's cache (one per run)  → lkey= and its counters
 * newcache                       replace that cache by an empty one (the next lookup takes the slow path)
 * race THREADS GOFILE LEN ADDR.. THREADS threads, each with its own cache, wait for GOFILE, then each looks
 *                                up every ADDR (thread t starting at ADDR number t): one line per lookup,
 *                                labelled LABEL.THREAD.I, then a summary line labelled LABEL
 * loop-lkey ADDR LEN MS          a lookup with a new (empty) cache every millisecond until one fails or MS
 *                                pass; prints LABEL.start when looping, then LABEL with iterations=
 * signal FILE                    create FILE (atomically), content the wall-clock time in ms
 * await FILE [MS]                wait for FILE (default 60 s; 0 = for ever)
 * close                          client.close()
 * exit CODE | halt CODE          System.exit / Runtime.halt, without closing anything
 * </pre>
 * ADDR is {@code NAME}, {@code NAME+OFF}, {@code NAME-OFF}, {@code NAME@end}, {@code NAME@end-OFF} or a number.
 * <p>
 * Output: {@code RESULT LABEL OK|ERR OP key=value... [message=TEXT]}; every line has {@code at=} (wall-clock
 * ms when the command ended) and {@code ns=} (its duration); an {@code ERR} line has {@code code=} (the
 * {@link ErrorCode} name, e.g. {@code ETIMEDOUT} for an {@code await} that ran out; else {@code USAGE} or
 * {@code IO}) and {@code type=} (the exception's simple name). The last line is {@code RESULT end OK done
 * errors=N}, exit status 0; a command the driver cannot parse ends the run with exit status 2.
 * {@link Result#parse} reads the lines back.
 */
public final class SecondaryDriver
{
    /** Start of every result line. */
    public static final String PREFIX = "RESULT ";
    /** Label of the last line. */
    public static final String END_LABEL = "end";
    private static final long DEFAULT_WAIT_MS = 60_000;
    private static final long POLL_NS = TimeUnit.MILLISECONDS.toNanos(5);

    private final Path dir;
    private final PrintStream out;
    private final Map<String, Named> names = new LinkedHashMap<>();
    private MrdClient client;
    private MrCache cache;
    /** Lookups made through {@link #cache}: the cache counts no MRU hit, they are derived from this. */
    private long cacheLookups;
    private int errors;

    /**
     * A named range: an allocation of this process ({@code segment} not null) or an imported one.
     */
    private record Named(long address, long length, MemorySegment segment)
    {
    }

    /**
     * A command that cannot be parsed: the test is wrong, so the run stops.
     */
    private static final class UsageException extends RuntimeException
    {
        private static final long serialVersionUID = 1L;

        UsageException(final String message)
        {
            super(message);
        }
    }

    private SecondaryDriver(final Path dir, final PrintStream out)
    {
        this.dir = dir;
        this.out = out;
    }

    public static void main(final String[] args)
    {
        if (null == System.getProperty("mrd.log.level"))
        {
            // The client's warnings (daemon death) are worth seeing in a failing test's output; debug is not.
            System.setProperty("mrd.log.level", "WARN");
        }
        if (args.length < 1)
        {
            System.err.println("usage: SecondaryDriver DIR COMMAND...");
            System.exit(2);
        }
        final SecondaryDriver driver = new SecondaryDriver(Path.of(args[0]), System.out);
        System.exit(driver.run(Arrays.asList(args).subList(1, args.length)));
    }

    private int run(final List<String> commands)
    {
        for (int i = 0; i < commands.size(); i++)
        {
            final List<String> words = new ArrayList<>(Arrays.asList(commands.get(i).trim().split("\\s+")));
            String label = String.valueOf(i + 1);
            if (words.size() > 1 && words.getLast().startsWith("#"))
            {
                label = words.removeLast().substring(1);
            }
            final String op = words.getFirst();
            final long startNs = System.nanoTime();
            // Filled as the command goes, so that an ERR line still says what was done (addr=, iterations=).
            final Map<String, Object> fields = new LinkedHashMap<>();
            try
            {
                execute(label, op, words.subList(1, words.size()), fields);
                print(label, true, op, startNs, fields, null);
            }
            catch (final UsageException | NumberFormatException ex)
            {
                fields.put("code", "USAGE");
                fields.put("type", "UsageException");
                print(label, false, op, startNs, fields, ex.getMessage() + " (command '" + commands.get(i) + "')");
                return 2;
            }
            catch (final RuntimeException ex)
            {
                errors++;
                fields.put("code", ex instanceof MrdException mrd ? mrd.code().name() : "IO");
                fields.put("type", ex.getClass().getSimpleName());
                print(label, false, op, startNs, fields, String.valueOf(ex.getMessage()));
            }
        }
        print(END_LABEL, true, "done", System.nanoTime(), Map.of("errors", errors), null);
        return 0;
    }

    private void execute(final String label, final String op, final List<String> args, final Map<String, Object> fields)
    {
        switch (op)
        {
            case "attach" ->
            {
                final ClientContext context = new ClientContext().dir(dir);
                for (final String arg : args)
                {
                    if (arg.startsWith("name="))
                    {
                        context.name(arg.substring("name=".length()));
                    }
                    else if (arg.startsWith("timeout="))
                    {
                        context.requestTimeoutMs(Long.parseLong(arg.substring("timeout=".length())));
                    }
                    else
                    {
                        throw new UsageException("unknown attach option " + arg);
                    }
                }
                client = MrdClient.attach(context);
                cache = client.newCache();
                cacheLookups = 0;
                fields.put("clientId", client.clientId());
                fields.put("daemonPid", client.daemonPid());
                fields.put("epoch", Sizes.hex(client.epoch()));
            }
            case "alloc" ->
            {
                arity(args, 2, 2);
                final MemorySegment segment = client().allocate(size(args.get(1)));
                names.put(args.get(0), new Named(segment.address(), segment.byteSize(), segment));
                fields.put("addr", Sizes.hex(segment.address()));
                fields.put("len", segment.byteSize());
            }
            case "free" ->
            {
                arity(args, 1, 1);
                final Named named = named(args.get(0));
                if (null == named.segment())
                {
                    throw new UsageException(args.get(0) + " was imported, not allocated here");
                }
                client().free(named.segment());
                fields.put("addr", Sizes.hex(named.address()));
            }
            case "publish" ->
            {
                arity(args, 2, 2);
                final Named named = named(args.get(0));
                writeAtomically(Path.of(args.get(1)), Sizes.hex(named.address()) + " " + named.length() + "\n");
            }
            case "import" ->
            {
                arity(args, 2, 3);
                final Path file = Path.of(args.get(1));
                awaitFile(file, args.size() > 2 ? Long.parseLong(args.get(2)) : DEFAULT_WAIT_MS);
                final String[] parts = readFile(file).trim().split("\\s+");
                final Named named = new Named(Sizes.parseAddress(parts[0]), Long.parseLong(parts[1]), null);
                names.put(args.get(0), named);
                fields.put("addr", Sizes.hex(named.address()));
                fields.put("len", named.length());
            }
            case "write" ->
            {
                arity(args, 3, 3);
                owned(args.get(0)).set(JAVA_LONG, size(args.get(1)), Long.decode(args.get(2)));
            }
            case "read" ->
            {
                arity(args, 2, 2);
                fields.put("value", owned(args.get(0)).get(JAVA_LONG, size(args.get(1))));
            }
            case "lkey" ->
            {
                arity(args, 2, 2);
                final long address = address(args.get(0));
                final long length = size(args.get(1));
                fields.put("addr", Sizes.hex(address));
                fields.put("len", length);
                if (null == cache)
                {
                    throw new UsageException("lkey before attach");
                }
                try
                {
                    cacheLookups++;
                    fields.put("lkey", Sizes.hex(cache.lkey(address, length) & 0xFFFF_FFFFL));
                }
                finally
                {
                    counters(cache, cacheLookups, fields);
                }
            }
            case "newcache" ->
            {
                cache = client().newCache();
                cacheLookups = 0;
            }
            case "race" -> race(label, args, fields);
            case "loop-lkey" -> loop(label, args, fields);
            case "signal" ->
            {
                arity(args, 1, 1);
                writeAtomically(Path.of(args.get(0)), System.currentTimeMillis() + "\n");
            }
            case "await" ->
            {
                arity(args, 1, 2);
                awaitFile(Path.of(args.get(0)), args.size() > 1 ? Long.parseLong(args.get(1)) : DEFAULT_WAIT_MS);
            }
            case "close" -> client().close();
            case "exit" ->
            {
                arity(args, 1, 1);
                out.flush();
                System.exit(Integer.parseInt(args.get(0)));
            }
            case "halt" ->
            {
                arity(args, 1, 1);
                out.flush();
                Runtime.getRuntime().halt(Integer.parseInt(args.get(0)));
            }
            default -> throw new UsageException("unknown command " + op);
        }
    }

    /**
     * Concurrent lookups of the same addresses by several threads of this process, each with its own cache,
     * released together when {@code GOFILE} appears (other drivers wait for the same file).
     */
    private void race(final String label, final List<String> args, final Map<String, Object> fields)
    {
        if (args.size() < 4)
        {
            throw new UsageException("race THREADS GOFILE LEN ADDR...");
        }
        final int threads = Integer.parseInt(args.get(0));
        final Path go = Path.of(args.get(1));
        final long length = size(args.get(2));
        final long[] addresses = args.subList(3, args.size()).stream().mapToLong(this::address).toArray();
        final MrdClient client = client();
        final CountDownLatch ready = new CountDownLatch(threads);
        final CountDownLatch start = new CountDownLatch(1);
        final int[] failures = new int[threads];
        final long[] creates = new long[threads];
        final List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++)
        {
            final int thread = t;
            final MrCache threadCache = client.newCache();
            final Thread worker = new Thread(() ->
            {
                ready.countDown();
                awaitLatch(start);
                for (int i = 0; i < addresses.length; i++)
                {
                    final long address = addresses[(thread + i) % addresses.length];
                    final long startNs = System.nanoTime();
                    final Map<String, Object> result = new LinkedHashMap<>();
                    result.put("thread", thread);
                    result.put("addr", Sizes.hex(address));
                    try
                    {
                        result.put("lkey", Sizes.hex(threadCache.lkey(address, length) & 0xFFFF_FFFFL));
                        print(label + "." + thread + "." + i, true, "race", startNs, result, null);
                    }
                    catch (final MrdException ex)
                    {
                        failures[thread]++;
                        result.put("code", ex.code().name());
                        result.put("type", ex.getClass().getSimpleName());
                        print(label + "." + thread + "." + i, false, "race", startNs, result, ex.getMessage());
                    }
                }
                creates[thread] = threadCache.createRequests();
            }, "race-" + t);
            workers.add(worker);
            worker.start();
        }
        awaitLatch(ready);
        try
        {
            awaitFile(go, DEFAULT_WAIT_MS);
        }
        finally
        {
            start.countDown();
            for (final Thread worker : workers)
            {
                joinQuietly(worker);
            }
        }
        final int failed = Arrays.stream(failures).sum();
        fields.put("threads", threads);
        fields.put("lookups", threads * addresses.length);
        fields.put("createRequests", Arrays.stream(creates).sum());
        fields.put("failures", failed);
        if (failed > 0)
        {
            throw new MrdException(ErrorCode.EIO, failed + " of the race's lookups failed (see " +
                label + ".* lines)");
        }
    }

    /**
     * Slow-path lookups until one fails: how long a secondary that keeps looking up takes to notice a dead
     * daemon (each lookup misses the empty cache and searches the global cache).
     */
    private void loop(final String label, final List<String> args, final Map<String, Object> fields)
    {
        arity(args, 3, 3);
        final long address = address(args.get(0));
        final long length = size(args.get(1));
        final long limitNs = TimeUnit.MILLISECONDS.toNanos(Long.parseLong(args.get(2)));
        final MrdClient client = client();
        final long startNs = System.nanoTime();
        print(label + ".start", true, "loop-lkey", startNs, Map.of("addr", Sizes.hex(address)), null);
        long iterations = 0;
        fields.put("addr", Sizes.hex(address));
        try
        {
            while (System.nanoTime() - startNs < limitNs)
            {
                final MrCache fresh = client.newCache();
                iterations++;
                fresh.lkey(address, length);
                LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(1));
            }
        }
        finally
        {
            fields.put("iterations", iterations);
        }
    }

    private MrdClient client()
    {
        if (null == client)
        {
            throw new UsageException("no client: the first command must be 'attach'");
        }
        return client;
    }

    private Named named(final String name)
    {
        final Named named = names.get(name);
        if (null == named)
        {
            throw new UsageException("no range named " + name + " (alloc or import it first)");
        }
        return named;
    }

    private MemorySegment owned(final String name)
    {
        final Named named = named(name);
        if (null == named.segment())
        {
            throw new UsageException(name + " was imported: only this process's allocations are mapped here");
        }
        return named.segment();
    }

    /**
     * {@code NAME}, {@code NAME+OFF}, {@code NAME-OFF}, {@code NAME@end}, {@code NAME@end-OFF}, or a number.
     */
    private long address(final String text)
    {
        if (Character.isDigit(text.charAt(0)))
        {
            return Sizes.parseAddress(text);
        }
        int cut = text.length();
        for (int i = 0; i < text.length(); i++)
        {
            final char c = text.charAt(i);
            if (c == '+' || c == '-' || c == '@')
            {
                cut = i;
                break;
            }
        }
        final Named named = named(text.substring(0, cut));
        long address = named.address();
        String rest = text.substring(cut);
        if (rest.startsWith("@end"))
        {
            address += named.length();
            rest = rest.substring("@end".length());
        }
        if (rest.startsWith("+"))
        {
            address += size(rest.substring(1));
        }
        else if (rest.startsWith("-"))
        {
            address -= size(rest.substring(1));
        }
        else if (!rest.isEmpty())
        {
            throw new UsageException("address '" + text + "' is not NAME[@end][+|-OFFSET] nor a number");
        }
        return address;
    }

    private static long size(final String text)
    {
        return text.startsWith("0x") ? Sizes.parseAddress(text) : Sizes.parse(text);
    }

    private static void arity(final List<String> args, final int min, final int max)
    {
        if (args.size() < min || args.size() > max)
        {
            throw new UsageException("expected " + (min == max ? min : min + " to " + max) + " arguments, got " +
                args.size());
        }
    }

    /** "top" counts the top half's hits: the linear scan's, and the MRU slot's derived from the lookups made. */
    private static void counters(final MrCache cache, final long lookups, final Map<String, Object> fields)
    {
        fields.put("top", cache.mruHits(lookups) + cache.topHits());
        fields.put("bottom", cache.bottomHits());
        fields.put("global", cache.globalHits());
        fields.put("creates", cache.createRequests());
        fields.put("flushes", cache.flushes());
    }

    private synchronized void print(
        final String label,
        final boolean ok,
        final String op,
        final long startNs,
        final Map<String, Object> fields,
        final String message)
    {
        final long ns = System.nanoTime() - startNs;
        final StringBuilder line = new StringBuilder(PREFIX).append(label).append(ok ? " OK " : " ERR ").append(op);
        fields.forEach((key, value) -> line.append(' ').append(key).append('=').append(value));
        line.append(" at=").append(System.currentTimeMillis()).append(" ns=").append(ns);
        if (null != message)
        {
            line.append(" message=").append(message.replace('\n', ' '));
        }
        out.println(line);
        out.flush();
    }

    /**
     * Waits for a file another process creates: the sync point between processes.
     */
    public static void awaitFile(final Path file, final long timeoutMs)
    {
        final long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        while (!Files.exists(file))
        {
            if (timeoutMs > 0 && System.nanoTime() - deadline > 0)
            {
                throw new MrdException(ErrorCode.ETIMEDOUT, "no " + file + " after " + timeoutMs + " ms");
            }
            LockSupport.parkNanos(POLL_NS);
        }
    }

    /**
     * Writes a file so that a reader never sees it partly written: a temporary file renamed over it.
     */
    public static void writeAtomically(final Path file, final String content)
    {
        try
        {
            final Path tmp = file.resolveSibling(file.getFileName() + ".tmp-" + ProcessHandle.current().pid());
            Files.writeString(tmp, content, StandardCharsets.UTF_8);
            Files.move(tmp, file, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        }
        catch (final IOException ex)
        {
            throw new MrdException(ErrorCode.EIO, "cannot write " + file + ": " + ex.getMessage());
        }
    }

    private static String readFile(final Path file)
    {
        try
        {
            return Files.readString(file, StandardCharsets.UTF_8);
        }
        catch (final IOException ex)
        {
            throw new MrdException(ErrorCode.EIO, "cannot read " + file + ": " + ex.getMessage());
        }
    }

    private static void awaitLatch(final CountDownLatch latch)
    {
        boolean interrupted = false;
        while (true)
        {
            try
            {
                latch.await();
                break;
            }
            catch (final InterruptedException ex)
            {
                interrupted = true;
            }
        }
        if (interrupted)
        {
            Thread.currentThread().interrupt();
        }
    }

    private static void joinQuietly(final Thread thread)
    {
        while (thread.isAlive())
        {
            try
            {
                thread.join();
            }
            catch (final InterruptedException ignore)
            {
                // the driver is ended by its commands, not by interrupts
            }
        }
    }

    /**
     * One result line, read back.
     *
     * @param label   the command's {@code #LABEL} or position ({@code LABEL.THREAD.I} for a race's lookups).
     * @param ok      {@code OK} or {@code ERR}.
     * @param op      the command.
     * @param fields  {@code key=value} pairs before the message.
     * @param message the text after {@code message=}, or empty.
     */
    public record Result(String label, boolean ok, String op, Map<String, String> fields, String message)
    {
        /**
         * @return the line as a result, or empty when it is not one (a log line).
         */
        public static Optional<Result> parse(final String line)
        {
            if (!line.startsWith(PREFIX))
            {
                return Optional.empty();
            }
            String body = line.substring(PREFIX.length());
            String message = "";
            final int at = body.indexOf(" message=");
            if (at >= 0)
            {
                message = body.substring(at + " message=".length());
                body = body.substring(0, at);
            }
            final String[] words = body.split(" ");
            if (words.length < 3)
            {
                return Optional.empty();
            }
            final Map<String, String> fields = new LinkedHashMap<>();
            for (int i = 3; i < words.length; i++)
            {
                final int eq = words[i].indexOf('=');
                if (eq > 0)
                {
                    fields.put(words[i].substring(0, eq), words[i].substring(eq + 1));
                }
            }
            return Optional.of(new Result(words[0], "OK".equals(words[1]), words[2], fields, message));
        }

        /**
         * @return the field's value.
         * @throws AssertionError naming the result when it has no such field.
         */
        public String get(final String key)
        {
            final String value = fields.get(key);
            if (null == value)
            {
                throw new AssertionError("no " + key + "= in " + this);
            }
            return value;
        }

        /** @return a hex or decimal field as a number ({@code addr}, {@code lkey}, {@code len}, ...). */
        public long number(final String key)
        {
            return Sizes.parseAddress(get(key));
        }

        /** @return the error code's name ({@code ENXIO}, ...) of an {@code ERR} line. */
        public String code()
        {
            return get("code");
        }

        /** @return the exception's simple name of an {@code ERR} line. */
        public String type()
        {
            return get("type");
        }
    }
}
