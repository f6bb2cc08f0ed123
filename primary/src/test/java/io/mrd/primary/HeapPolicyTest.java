package io.mrd.primary;

import com.sun.management.HotSpotDiagnosticMXBean;
import io.mrd.testing.ChildJvm;
import org.junit.jupiter.api.Test;

import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * What {@link HeapPolicy#apply()} leaves set in a JVM of its own (a child, since the policy is applied once per
 * JVM): on G1, the periodic collection, the free ratios and the native trimmer; flags given at launch kept; on
 * another collector, a line saying how to get memory back. FuzzTest measures the effect on a real daemon.
 */
final class HeapPolicyTest
{
    private static final List<String> FLAGS =
        List.of("MinHeapFreeRatio", "MaxHeapFreeRatio", "G1PeriodicGCInterval", "TrimNativeHeapInterval");

    /**
     * Applies the policy, then prints {@code flag=value} for each of {@link #FLAGS}, {@code trimmer=} whether the
     * trimming thread runs, and {@code DONE}.
     */
    public static void main(final String[] args)
    {
        HeapPolicy.apply();
        final HotSpotDiagnosticMXBean hotSpot = ManagementFactory.getPlatformMXBean(HotSpotDiagnosticMXBean.class);
        for (final String flag : FLAGS)
        {
            System.out.println(flag + "=" + hotSpot.getVMOption(flag).getValue());
        }
        System.out.println("trimmer=" +
            Thread.getAllStackTraces().keySet().stream().anyMatch(t -> t.getName().equals("mrd-native-trim")));
        System.out.println("DONE");
    }

    @Test
    void onG1IdleHeapIsUncommittedAndTheNativeHeapTrimmed()
    {
        final Map<String, String> expected = new LinkedHashMap<>();
        expected.put("MinHeapFreeRatio", Integer.toString(HeapPolicy.MIN_HEAP_FREE_PERCENT));
        expected.put("MaxHeapFreeRatio", Integer.toString(HeapPolicy.MAX_HEAP_FREE_PERCENT));
        expected.put("G1PeriodicGCInterval", Long.toString(HeapPolicy.PERIODIC_GC_INTERVAL_MS));
        expected.put("TrimNativeHeapInterval", "0");
        expected.put("trimmer", "true");
        assertEquals(expected, run(List.of("-XX:-UseSerialGC", "-XX:+UseG1GC")).values);
    }

    @Test
    void flagsGivenAtLaunchAreKept()
    {
        final Map<String, String> expected = new LinkedHashMap<>();
        expected.put("MinHeapFreeRatio", Integer.toString(HeapPolicy.MIN_HEAP_FREE_PERCENT));
        expected.put("MaxHeapFreeRatio", "50");
        expected.put("G1PeriodicGCInterval", "0");
        expected.put("TrimNativeHeapInterval", "60000");
        expected.put("trimmer", "false");
        assertEquals(expected, run(List.of("-XX:-UseSerialGC", "-XX:+UseG1GC", "-XX:MaxHeapFreeRatio=50",
            "-XX:G1PeriodicGCInterval=0", "-XX:TrimNativeHeapInterval=60000")).values);
    }

    @Test
    void onSerialTheDaemonSaysHowToGetTheHeapBack()
    {
        final Result result = run(List.of("-XX:+UseSerialGC"));
        assertEquals("0", result.values.get("G1PeriodicGCInterval"));
        assertEquals("true", result.values.get("trimmer"));
        assertTrue(result.output.contains("collector is not G1 (Copy, MarkSweepCompact)") &&
            result.output.contains("start the daemon with -XX:+UseG1GC"), result.output);
    }

    private record Result(Map<String, String> values, String output)
    {
    }

    private static Result run(final List<String> jvmFlags)
    {
        try (ChildJvm child = ChildJvm.start("heap-policy", HeapPolicyTest.class.getName(), List.of(), Map.of(),
            jvmFlags))
        {
            child.awaitLine("DONE"::equals, Duration.ofSeconds(30));
            final Map<String, String> values = new LinkedHashMap<>();
            for (final String line : child.lines())
            {
                final int equals = line.indexOf('=');
                if (equals > 0 && (FLAGS.contains(line.substring(0, equals)) || line.startsWith("trimmer=")))
                {
                    values.put(line.substring(0, equals), line.substring(equals + 1));
                }
            }
            return new Result(values, child.output());
        }
    }
}
