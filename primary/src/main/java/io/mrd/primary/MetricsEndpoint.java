package io.mrd.primary;

import io.mrd.layout.ControlFile;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.tools.MetricsText;
import io.prometheus.metrics.exporter.httpserver.HTTPServer;
import io.prometheus.metrics.model.registry.MultiCollector;
import io.prometheus.metrics.model.registry.PrometheusRegistry;

import java.io.IOException;
import java.net.InetSocketAddress;

/**
 * {@code mrd start --metrics HOST:PORT}: the Prometheus Java client's HTTP server on {@code /metrics},
 * scraping the control file's counters at each request ({@link MetricsText#snapshots}).
 */
public final class MetricsEndpoint implements AutoCloseable
{
    private final HTTPServer server;

    private MetricsEndpoint(final HTTPServer server)
    {
        this.server = server;
    }

    /**
     * @param address where to listen; the daemon passes the loopback address unless told otherwise.
     * @throws MrdException EADDRINUSE-like EBUSY naming the address when it cannot bind.
     */
    public static MetricsEndpoint start(final InetSocketAddress address, final ControlFile controlFile)
    {
        final PrometheusRegistry registry = new PrometheusRegistry();
        registry.register((MultiCollector)() -> MetricsText.snapshots(controlFile));
        try
        {
            return new MetricsEndpoint(HTTPServer.builder()
                .inetAddress(address.getAddress())
                .port(address.getPort())
                .registry(registry)
                .buildAndStart());
        }
        catch (final IOException ex)
        {
            throw new MrdException(ErrorCode.EBUSY, "cannot serve metrics on " + address.getHostString() + ":" +
                address.getPort() + ": " + ex.getMessage() + ": choose another --metrics HOST:PORT");
        }
    }

    /**
     * @return the port it listens on (useful with port 0).
     */
    public int port()
    {
        return server.getPort();
    }

    public void close()
    {
        server.close();
    }
}
