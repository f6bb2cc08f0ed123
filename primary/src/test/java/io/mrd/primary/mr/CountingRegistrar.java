package io.mrd.primary.mr;

import io.mrd.primary.provider.Registrar;
import io.mrd.primary.provider.Registration;
import io.mrd.primary.provider.SharedDevice;

import java.util.List;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BiConsumer;
import java.util.function.Consumer;

/**
 * A provider that counts what the engine asked of it ({@link EngineFixture}'s).
 */
final class CountingRegistrar implements Registrar
{
    final Registrar delegate;
    final AtomicInteger registrations = new AtomicInteger();
    final AtomicInteger failures = new AtomicInteger();
    final AtomicInteger deregistrations = new AtomicInteger();

    CountingRegistrar(final Registrar delegate)
    {
        this.delegate = delegate;
    }

    public String name()
    {
        return delegate.name();
    }

    /**
     * Runs before each registration reaches the provider, with no engine lock held: where a test injects
     * latency (a sleep, or a latch) or a failure (by throwing).
     */
    volatile BiConsumer<Long, Long> beforeRegister = (address, length) -> {};
    /** What {@link #maxRegionLength} answers: the device's max_mr_size a test plays. */
    volatile long maxRegionLength = Long.MAX_VALUE;

    public long maxRegionLength()
    {
        return maxRegionLength;
    }

    public Registration register(final long address, final long length, final int access)
    {
        try
        {
            beforeRegister.accept(address, length);
            final Registration registration = delegate.register(address, length, access);
            registrations.incrementAndGet();
            return registration;
        }
        catch (final RuntimeException ex)
        {
            failures.incrementAndGet();
            throw ex;
        }
    }

    /** Runs before each deregistration reaches the provider, to observe the engine at that moment. */
    volatile Consumer<Registration> beforeDeregister = registration -> {};

    public Registration adopt(final Registration recorded, final int access)
    {
        return delegate.adopt(recorded, access);
    }

    public void deregister(final Registration registration)
    {
        beforeDeregister.accept(registration);
        deregistrations.incrementAndGet();
        delegate.deregister(registration);
    }

    public long pinnedBytes()
    {
        return delegate.pinnedBytes();
    }

    public Optional<SharedDevice> sharedDevice()
    {
        return delegate.sharedDevice();
    }

    public List<SharedDevice> sharedDevices()
    {
        return delegate.sharedDevices();
    }

    public void beforePublish(final Registration registration)
    {
        delegate.beforePublish(registration);
    }

    int live()
    {
        return registrations.get() - deregistrations.get();
    }

    public void close()
    {
        delegate.close();
    }
}
