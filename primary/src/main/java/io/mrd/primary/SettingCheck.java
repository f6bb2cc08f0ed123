package io.mrd.primary;

import io.mrd.layout.sys.Sizes;

/**
 * What a setting's value must be, alone: {@link DaemonContext#conclude()} asks every row's check, in the order
 * of the rows, then checks what settings must be together. The context adds where the value came from.
 *
 * @param <T> the value's type.
 */
@FunctionalInterface
public interface SettingCheck<T>
{
    /**
     * @param name  how the operator names the setting: its option, or its variable when it has none.
     * @param value the value.
     * @return null when the value is right; else what is wrong with it, naming it and {@code name}, and what
     * would be right, e.g. {@code --max-mrs 0 must be between 1 and 1048576}.
     */
    String refusal(String name, T value);

    /**
     * @return a check that takes any value: a value of the kind is all the setting asks for, or the use
     * checks it (the daemon, as it opens a hugetlbfs mount or a device).
     */
    static <T> SettingCheck<T> any()
    {
        return (name, value) -> null;
    }

    /**
     * @param unit what follows the number in the message, e.g. {@code " ms"}, or empty.
     */
    static SettingCheck<Integer> between(final int min, final int max, final String unit)
    {
        return (name, value) -> value < min || value > max ?
            name + " " + value + unit + " must be between " + min + " and " + max : null;
    }

    /**
     * @return the check of a size made of whole units, e.g. memory segments: a positive one, or also 0.
     */
    static SettingCheck<Long> multipleOf(final long unit, final boolean positive)
    {
        return (name, value) -> (positive ? value < unit : value < 0) || value % unit != 0 ?
            name + " " + Sizes.format(value) + " must be a " + (positive ? "positive " : "") + "multiple of " +
            Sizes.format(unit) : null;
    }
}
