package io.mrd.primary.provider;

import io.mrd.primary.histogram.Histograms;

import java.util.List;
import java.util.Optional;

/**
 * A provider whose registrations are timed and sized into the daemon's histograms: wraps the engine's provider,
 * so that every registration is measured in one place, managed and external memory alike. Failed registrations
 * are not recorded (their size says nothing about what is pinned).
 */
public final class TimedRegistrar implements Registrar
{
    private final Registrar registrar;
    private final Histograms histograms;

    public TimedRegistrar(final Registrar registrar, final Histograms histograms)
    {
        this.registrar = registrar;
        this.histograms = histograms;
    }

    public String name()
    {
        return registrar.name();
    }

    public Registration register(final long address, final long length, final int access)
    {
        final long startNs = System.nanoTime();
        final Registration registration = registrar.register(address, length, access);
        histograms.registered(startNs, registration.length());
        return registration;
    }

    public Registration adopt(final Registration recorded, final int access)
    {
        return registrar.adopt(recorded, access);
    }

    public void deregister(final Registration registration)
    {
        registrar.deregister(registration);
    }

    public long maxRegionLength()
    {
        return registrar.maxRegionLength();
    }

    public long pinnedBytes()
    {
        return registrar.pinnedBytes();
    }

    public Optional<SharedDevice> sharedDevice()
    {
        return registrar.sharedDevice();
    }

    /**
     * Closes the wrapped provider.
     */
    public List<SharedDevice> sharedDevices()
    {
        return registrar.sharedDevices();
    }

    public void beforePublish(final Registration registration)
    {
        registrar.beforePublish(registration);
    }

    public void close()
    {
        registrar.close();
    }
}
