package io.mrd.primary.provider;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;

/**
 * One place in a registration on several devices where a test makes it fail: the Nth registration (a chunk of
 * memory becoming one MR), on device {@code device}, at {@code step}. What must hold after any of them is the
 * multi-device rule: nothing of that registration stays pinned, registered on any device or cached.
 *
 * @param device       the device's number (its place in {@code --device}), 0 for {@link Step#POPULATE}, which
 *                     runs once for every device.
 * @param registration the registration it hits, counting from 1 (as {@code --fail-nth} counts).
 * @param step         where in that registration.
 */
public record FaultPoint(int device, long registration, Step step)
{
    /** The steps of one registration, in the order they run. */
    public enum Step
    {
        /** Faulting the range in, once, before any device registers it. */
        POPULATE,
        /** Device {@code device}'s {@code ibv_reg_mr}: it fails instead of being called. */
        REGISTER,
        /** Just after device {@code device}'s {@code ibv_reg_mr} succeeded: its MR must be undone as well. */
        REGISTERED,
        /** The engine publishing device {@code device}'s keys, after every device registered. */
        PUBLISH
    }

    public FaultPoint
    {
        if (device < 0 || registration < 1 || (step == Step.POPULATE && device != 0))
        {
            throw new IllegalArgumentException("fault point device " + device + ", registration " + registration +
                ", step " + step + ": device >= 0 (0 for POPULATE), registration >= 1");
        }
    }

    /**
     * @throws MrdException ENOMEM naming this point when it is the one asked for.
     */
    void hit(final int atDevice, final long atRegistration, final Step atStep)
    {
        if (atDevice == device && atRegistration == registration && atStep == step)
        {
            throw new MrdException(ErrorCode.ENOMEM, "injected failure at " + step + " of registration #" +
                registration + " on device " + device);
        }
    }
}
