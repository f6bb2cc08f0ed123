package io.mrd.layout;

/**
 * How a message that needs an RDMA device points at the emulated one, in the daemon ({@code --provider
 * ibverbs} without a device, {@code IMPORT_PD} to a soft daemon) and in a secondary (no libibverbs): one phrasing,
 * so that a developer on a host without an RDMA NIC reads the same remedy wherever it fails.
 */
public final class EmulatedDeviceAdvice
{
    /** The libibverbs the daemon and a secondary load (a path or a soname); both must load the same one. */
    public static final String LIBRARY_ENV = "MRD_IBVERBS_LIBRARY";

    /** A noun phrase that fits after "use" or "on". */
    public static final String EMULATED_DEVICE = "the emulated device (build it with 'scripts/mrd emulator', which " +
        "prints its path, emulator/target/libmrdemu.so, and set " + LIBRARY_ENV + " to that path for the daemon " +
        "and every worker)";

    private EmulatedDeviceAdvice()
    {
    }
}
