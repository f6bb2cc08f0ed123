package io.mrd.primary;

import io.mrd.layout.ControlFile;
import io.mrd.layout.MrdCounter;
import org.agrona.concurrent.status.CountersReader;

import java.util.EnumMap;
import java.util.Map;

/**
 * The daemon's counters in the Prometheus text exposition format (version 0.0.4): what {@code mrd stat
 * --prometheus} prints and what {@code mrd start --metrics HOST:PORT} serves on {@code /metrics}. Both read
 * the control file's counters section, so the output is the same whoever renders it.
 * <p>
 * Every {@link MrdCounter} becomes {@code mrd_<metricName>}: a {@code counter} when the name ends in
 * {@code _total}, else a {@code gauge}. Three gauges are added: {@code mrd_up} (1 while the heartbeat is fresh),
 * {@code mrd_heartbeat_age_ms} (-1 once the daemon closed the file) and {@code mrd_dev_gen} (from the header;
 * the {@link MrdCounter#DEV_GEN} counter mirrors it and is not repeated).
 */
public final class MetricsText
{
    /** The content type to serve the text with. */
    public static final String CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";
    /** Prefix of every metric name. */
    public static final String PREFIX = "mrd_";

    private MetricsText()
    {
    }

    /**
     * @param ctl a control file mapped by the daemon or opened read-only by a tool.
     * @return the exposition text, one {@code # HELP}, one {@code # TYPE} and one sample line per metric.
     */
    public static String render(final ControlFile ctl)
    {
        return render(ctl, System.currentTimeMillis());
    }

    /**
     * @param nowMs the wall clock, for the heartbeat age.
     */
    public static String render(final ControlFile ctl, final long nowMs)
    {
        final StringBuilder out = new StringBuilder(4096);
        final long heartbeatAgeMs = ctl.heartbeatAgeMs(nowMs);
        final long staleMs = (long)DaemonContext.STALE_HEARTBEAT_INTERVALS *
            Math.max(1, ctl.header().heartbeatIntervalMs());
        final boolean up = heartbeatAgeMs >= 0 && heartbeatAgeMs <= staleMs;
        metric(out, "up", "gauge", "1 while the daemon's heartbeat is fresh, 0 when it is stale or the daemon closed",
            up ? 1 : 0);
        metric(out, "heartbeat_age_ms", "gauge",
            "milliseconds since the daemon's last heartbeat, -1 after a clean shutdown", heartbeatAgeMs);
        metric(out, "dev_gen", "gauge", "devGen: bumped on every memory event that invalidates local caches",
            ctl.header().devGen());
        for (final Map.Entry<MrdCounter, Long> entry : counters(ctl).entrySet())
        {
            final MrdCounter counter = entry.getKey();
            if (counter == MrdCounter.DEV_GEN)
            {
                continue;
            }
            metric(out, counter.metricName(), counter.metricName().endsWith("_total") ? "counter" : "gauge",
                counter.label(), entry.getValue());
        }
        return out.toString();
    }

    /**
     * @return the value of every {@link MrdCounter} the daemon allocated, in enum order.
     */
    public static Map<MrdCounter, Long> counters(final ControlFile ctl)
    {
        final CountersReader reader = ctl.countersReader();
        final Map<MrdCounter, Long> values = new EnumMap<>(MrdCounter.class);
        reader.forEach((counterId, typeId, keyBuffer, label) ->
        {
            final MrdCounter counter = MrdCounter.ofTypeId(typeId);
            if (null != counter)
            {
                values.put(counter, reader.getCounterValue(counterId));
            }
        });
        return values;
    }

    private static void metric(
        final StringBuilder out, final String name, final String type, final String help, final long value)
    {
        out.append("# HELP ").append(PREFIX).append(name).append(' ').append(escapeHelp(help)).append('\n');
        out.append("# TYPE ").append(PREFIX).append(name).append(' ').append(type).append('\n');
        out.append(PREFIX).append(name).append(' ').append(value).append('\n');
    }

    private static String escapeHelp(final String help)
    {
        return help.replace("\\", "\\\\").replace("\n", "\\n");
    }
}
