package io.mrd.primary.provider;

import io.mrd.layout.Access;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.RemoteAccess;
import io.mrd.layout.sys.Sizes;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.VarHandle;

import static java.lang.foreign.MemoryLayout.PathElement.groupElement;

/**
 * The MR calls on one device's protection domain: {@code ibv_reg_mr}, {@code ibv_dereg_mr} and
 * {@code ibv_import_mr}, with errors that name the device. It neither populates nor counts pinned bytes: a range
 * registered on several devices is populated and counted once, by {@link IbverbsRegistrar}, which calls one of
 * these per device.
 * <p>
 * Thread-safe: libibverbs allows registrations on one PD from any number of threads.
 */
@SuppressWarnings("restricted")
final class DeviceRegistrar
{
    private static final VarHandle MR_ADDR = IbverbsRegistrar.IBV_MR.varHandle(groupElement("addr"));
    private static final VarHandle MR_LENGTH = IbverbsRegistrar.IBV_MR.varHandle(groupElement("length"));
    private static final VarHandle MR_HANDLE = IbverbsRegistrar.IBV_MR.varHandle(groupElement("handle"));
    private static final VarHandle MR_LKEY = IbverbsRegistrar.IBV_MR.varHandle(groupElement("lkey"));
    private static final VarHandle MR_RKEY = IbverbsRegistrar.IBV_MR.varHandle(groupElement("rkey"));

    private final IbverbsDevice device;
    private final int number;

    DeviceRegistrar(final IbverbsDevice device, final int number)
    {
        this.device = device;
        this.number = number;
    }

    IbverbsDevice device()
    {
        return device;
    }

    String name()
    {
        return device.deviceName();
    }

    /**
     * @return "device N (name)", as messages name it.
     */
    String describe()
    {
        return "device " + number + " (" + device.deviceName() + ")";
    }

    /**
     * {@code ibv_reg_mr} of a populated range. verbs.h makes {@code ibv_reg_mr} a macro: with a flag of
     * {@link Access#OPTIONAL_RANGE} compiled C calls {@code ibv_reg_mr_iova2}, so this does too; a library older
     * than rdma-core 28 lacks it, and then the optional flags are dropped, as devices may ignore them.
     *
     * @param placed      the access, its placement included (which the device is not given).
     * @param pinnedBytes what mrd has pinned, for the message of an ENOMEM.
     * @throws MrdException the errno of {@code ibv_reg_mr}, named in the message with the device.
     */
    Registration.DeviceMr register(final long address, final long length, final int placed, final long pinnedBytes)
    {
        final int access = Access.verbs(placed);
        final MemorySegment mr;
        final int errno;
        try
        {
            final MemorySegment state = IbverbsDevice.callState();
            if (0 != (access & Access.OPTIONAL_RANGE) && null != device.regMrIova2)
            {
                mr = (MemorySegment)device.regMrIova2.invokeExact(
                    state, device.pd(), MemorySegment.ofAddress(address), length, address, access);
            }
            else
            {
                final int flags = null == device.regMrIova2 ? access & ~Access.OPTIONAL_RANGE : access;
                mr = (MemorySegment)device.regMr.invokeExact(
                    state, device.pd(), MemorySegment.ofAddress(address), length, flags);
            }
            errno = IbverbsDevice.errno();
        }
        catch (final Throwable t)
        {
            throw IbverbsDevice.rethrow(t);
        }
        if (MemorySegment.NULL.equals(mr))
        {
            throw regFailure(errno, address, length, access, pinnedBytes);
        }
        return mrOf(mr, access);
    }

    /**
     * {@code ibv_dereg_mr}.
     *
     * @throws MrdException the errno it returned; the MR is still registered then.
     */
    void deregister(final long address, final long length, final Registration.DeviceMr mr)
    {
        final int result;
        try
        {
            result = (int)device.deregMr.invokeExact(IbverbsDevice.callState(), MemorySegment.ofAddress(mr.handle()));
        }
        catch (final Throwable t)
        {
            throw IbverbsDevice.rethrow(t);
        }
        if (0 != result)
        {
            // rdma-core returns the errno; older libraries returned -1 and set errno.
            final int errno = result > 0 ? result : IbverbsDevice.errno();
            throw new MrdException(ErrorCode.of(errno), "ibv_dereg_mr of " + Sizes.format(length) + " at " +
                Sizes.hex(address) + " on " + describe() + " failed: " + ErrorCode.describe(errno));
        }
    }

    /**
     * {@code ibv_import_mr}: the MR this device's handle names now, checked against the recorded one.
     *
     * @throws MrdException EINVAL when the device knows no MR of that handle in this PD, or it differs from the
     *                      record (the message names what); ENOSYS without {@code ibv_import_mr}.
     */
    Registration.DeviceMr adopt(final long address, final long length, final Registration.DeviceMr recorded,
        final int access)
    {
        final MemorySegment mr = device.importMr(recorded.deviceHandle());
        if (MemorySegment.NULL.equals(mr))
        {
            final int errno = IbverbsDevice.errno();
            throw new MrdException(ErrorCode.of(errno), "ibv_import_mr(handle " + recorded.deviceHandle() + ") on " +
                describe() + " failed: " + ErrorCode.describe(errno) + ": the predecessor's MR of " +
                Sizes.format(length) + " at " + Sizes.hex(address) + " is gone");
        }
        final MemorySegment struct = mr.reinterpret(IbverbsRegistrar.IBV_MR.byteSize());
        final long importedAddress = ((MemorySegment)MR_ADDR.get(struct, 0L)).address();
        final long importedLength = (long)MR_LENGTH.get(struct, 0L);
        final Registration.DeviceMr imported = mrOf(mr, access);
        if (importedAddress != address || importedLength != length ||
            imported.lkey() != recorded.lkey() || imported.rkey() != recorded.rkey())
        {
            // the struct is this process's copy: deregistering would destroy whatever MR the handle names now
            device.unimportMr(mr);
            throw new MrdException(ErrorCode.EINVAL, "MR handle " + recorded.deviceHandle() + " on " + describe() +
                " is " + Sizes.format(importedLength) + " at " + Sizes.hex(importedAddress) + " lkey " +
                Sizes.hex(imported.lkey() & 0xFFFF_FFFFL) + ", but the control file records " +
                Sizes.format(length) + " at " + Sizes.hex(address) + " lkey " +
                Sizes.hex(recorded.lkey() & 0xFFFF_FFFFL) + ": not the predecessor's MR");
        }
        return imported;
    }

    private static Registration.DeviceMr mrOf(final MemorySegment mr, final int access)
    {
        final MemorySegment struct = mr.reinterpret(IbverbsRegistrar.IBV_MR.byteSize());
        return new Registration.DeviceMr(
            (int)MR_LKEY.get(struct, 0L),
            RemoteAccess.rkey(access, (int)MR_RKEY.get(struct, 0L)),
            mr.address(),
            (int)MR_HANDLE.get(struct, 0L));
    }

    private MrdException regFailure(
        final int errno, final long address, final long length, final int access, final long pinnedBytes)
    {
        final String message = "ibv_reg_mr of " + Sizes.format(length) + " at " + Sizes.hex(address) + " (access " +
            Sizes.hex(access) + ") on " + describe() + " failed: " + ErrorCode.describe(errno);
        if (ErrorCode.ENOMEM.errno() == errno)
        {
            return new MrdException(ErrorCode.ENOMEM, message + "; mrd has " + Sizes.format(pinnedBytes) +
                " pinned and " + PinnedBytes.memlockAdvice());
        }
        if (ErrorCode.EFAULT.errno() == errno)
        {
            return new MrdException(ErrorCode.EFAULT, message + ": part of the range is not mapped");
        }
        return new MrdException(ErrorCode.of(errno), message);
    }
}
