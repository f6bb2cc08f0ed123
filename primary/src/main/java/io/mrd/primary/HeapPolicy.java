package io.mrd.primary;

import com.sun.management.HotSpotDiagnosticMXBean;
import com.sun.management.VMOption;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import javax.management.JMException;
import javax.management.MBeanServer;
import javax.management.ObjectName;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.util.stream.Collectors;

/**
 * How the daemon gives memory back to the system after a burst of work.
 * <p>
 * Every connection, even one dropped at once, leaves some 10 KiB of short-lived garbage (Netty's channel and
 * pipeline, the session, its 4 KiB frame buffer). A burst of them (thousands of clients, or a hostile process
 * opening and dropping sockets) keeps the live heap at 8-10 MB but leaves memory resident that the daemon no
 * longer uses; Netty's direct memory, thread stacks, metaspace and code do not grow. Two kinds, each given back:
 * <ul>
 *   <li><b>committed heap</b> (some 150 MiB after 20,000 connections): G1 expands the heap when its
 *       collections take more than their share of the time, as they do at that allocation rate (more so on a
 *       busy host), and, in JDK 25, uncommits only after a collection that marks the heap (a concurrent cycle's
 *       remark, or a full GC), which an idle daemon, allocating almost nothing, never starts. Here G1 starts a
 *       concurrent cycle once there has been no collection for {@link #PERIODIC_GC_INTERVAL_MS}, and its remark
 *       uncommits the free heap beyond {@link #MAX_HEAP_FREE_PERCENT}%. An idle daemon pays one small cycle per
 *       interval (0.2% of a core at 5 s, 0.7% at 1 s);</li>
 *   <li><b>freed native memory</b> (some 25 MiB): the JIT compilers' arenas, freed to glibc's malloc, which
 *       keeps them in its own arenas. Every {@link #NATIVE_TRIM_INTERVAL_MS} the daemon asks the JVM to trim
 *       the native heap ({@code System.trim_native_heap}: glibc's {@code malloc_trim}).</li>
 * </ul>
 * The flags are {@code manageable}: the daemon sets them on itself at start, so that every way of starting it
 * (the background launcher, {@code --foreground} under systemd, the tests) gets the same policy; a flag an
 * operator gave at launch ({@code -XX:MaxHeapFreeRatio=}, {@code -XX:TrimNativeHeapInterval=}, ...) is kept as
 * given. The peak during a burst is G1's own sizing, not bounded here: a site that wants a hard cap gives the
 * daemon {@code -Xmx} (the tests run daemons in 256 MiB). Only G1 has the periodic cycle; Serial, which the JVM
 * picks on a host with one CPU or less than 1792 MiB of memory, never shrinks its heap below the initial size
 * (a 64th of the host's memory), and the daemon says so at start.
 */
public final class HeapPolicy
{
    /** Time without a collection after which G1 runs one on its own and uncommits, in ms. */
    public static final long PERIODIC_GC_INTERVAL_MS = 5_000;

    /** Free heap beyond this share of the heap is uncommitted after a collection that marks the heap. */
    public static final int MAX_HEAP_FREE_PERCENT = 20;

    /** The heap grows when less than this share is free after such a collection. */
    public static final int MIN_HEAP_FREE_PERCENT = 5;

    /** How often freed native memory is handed back to the system, in ms. */
    public static final long NATIVE_TRIM_INTERVAL_MS = 5_000;

    private static final String DIAGNOSTIC_COMMAND = "com.sun.management:type=DiagnosticCommand";

    private static final Logger LOG = LoggerFactory.getLogger(HeapPolicy.class);

    private static boolean applied;

    private HeapPolicy()
    {
    }

    /**
     * Applies the policy to this JVM, once per JVM however many daemons it runs (in-process tests); logs, and
     * goes on, when the JVM refuses a flag or a trim.
     */
    public static synchronized void apply()
    {
        if (applied)
        {
            return;
        }
        applied = true;
        final HotSpotDiagnosticMXBean hotSpot = ManagementFactory.getPlatformMXBean(HotSpotDiagnosticMXBean.class);
        // The minimum first: the JVM refuses a maximum below the current minimum (40 by default).
        setUnlessGiven(hotSpot, "MinHeapFreeRatio", Integer.toString(MIN_HEAP_FREE_PERCENT));
        setUnlessGiven(hotSpot, "MaxHeapFreeRatio", Integer.toString(MAX_HEAP_FREE_PERCENT));
        if (Boolean.parseBoolean(hotSpot.getVMOption("UseG1GC").getValue()))
        {
            setUnlessGiven(hotSpot, "G1PeriodicGCInterval", Long.toString(PERIODIC_GC_INTERVAL_MS));
        }
        else
        {
            LOG.info("the JVM's collector is not G1 ({}): heap committed for a burst of clients may stay committed " +
                "(Serial keeps at least its initial {} MiB); start the daemon with -XX:+UseG1GC " +
                "(MRD_JAVA_OPTS) to have it given back", collectorNames(),
                ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getInit() >> 20);
        }
        if (isGiven(hotSpot.getVMOption("TrimNativeHeapInterval")))
        {
            return;
        }
        Thread.ofPlatform().name("mrd-native-trim").daemon(true).start(HeapPolicy::trimNativeHeapForever);
    }

    private static void trimNativeHeapForever()
    {
        try
        {
            final MBeanServer server = ManagementFactory.getPlatformMBeanServer();
            final ObjectName diagnostics = new ObjectName(DIAGNOSTIC_COMMAND);
            while (true)
            {
                Thread.sleep(NATIVE_TRIM_INTERVAL_MS);
                server.invoke(diagnostics, "systemTrimNativeHeap", null, null);
            }
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
        catch (final JMException ex)
        {
            LOG.warn("native heap trimming stopped ({}): freed native memory may stay resident", ex.toString());
        }
    }

    private static void setUnlessGiven(final HotSpotDiagnosticMXBean hotSpot, final String flag, final String value)
    {
        if (isGiven(hotSpot.getVMOption(flag)))
        {
            return;
        }
        try
        {
            hotSpot.setVMOption(flag, value);
        }
        catch (final IllegalArgumentException ex)
        {
            LOG.warn("JVM flag {}={} refused ({}): idle heap may stay committed; with -XX:MinHeapFreeRatio given " +
                "at launch, give -XX:MaxHeapFreeRatio too", flag, value, ex.getMessage());
        }
    }

    /**
     * @return whether the flag was set by whoever launched the JVM (command line, {@code JAVA_TOOL_OPTIONS}, a
     * flags file), rather than left to its default or to the JVM's ergonomics.
     */
    private static boolean isGiven(final VMOption option)
    {
        return option.getOrigin() != VMOption.Origin.DEFAULT && option.getOrigin() != VMOption.Origin.ERGONOMIC;
    }

    private static String collectorNames()
    {
        return ManagementFactory.getGarbageCollectorMXBeans().stream().map(GarbageCollectorMXBean::getName)
            .collect(Collectors.joining(", "));
    }
}
