package io.mrd.primary;

import io.mrd.layout.sys.Sizes;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.function.Function;
import java.util.function.Predicate;
import java.util.function.UnaryOperator;

/**
 * The kind of a setting's value: how the text of its option or variable becomes the value, and how a value is
 * written in {@code --help} (its default) and in the context's log line. A row of {@link DaemonSettings} names one;
 * a new setting nearly always reuses one of these, or makes its own with {@link #of}.
 * <p>
 * A parser throws any {@link RuntimeException} for a text it cannot read; {@link DaemonSetting#parse} turns
 * that into the error the operator reads. An {@link io.mrd.layout.MrdException} says itself what is wrong with
 * the text (sizes and addresses do), so an option's error carries its message whole.
 *
 * @param <T> the value's type; absent values are {@link Optional}s ({@link #optional}), never null.
 */
public final class SettingType<T>
{
    /** A size with an optional binary unit: {@code 64MiB}, {@code 2GiB}, {@code 4096}; none is written 0. */
    public static final SettingType<Long> SIZE = of(Sizes::parse, bytes -> 0 == bytes ? "0" : Sizes.format(bytes));
    /** An address, hex ({@code 0x100000000000}) or decimal, never negative. */
    public static final SettingType<Long> ADDRESS = of(Sizes::parseAddress, Sizes::hex);
    public static final SettingType<Integer> INT = of(Integer::parseInt, String::valueOf);
    public static final SettingType<Long> LONG = of(Long::parseLong, String::valueOf);
    /** {@code true} or {@code false}, any case; on the command line a flag with a {@code --no-} form. */
    public static final SettingType<Boolean> BOOLEAN = new SettingType<>(SettingType::parseBoolean,
        String::valueOf, UnaryOperator.identity(), v -> false, true, true, null);
    /** Any text, blank included (a check says what it may be). */
    public static final SettingType<String> TEXT = of(Function.identity(), Function.identity());
    /** Text that is not blank: a name, which blank would leave out without saying so. */
    public static final SettingType<String> NAME = of(SettingType::requireNonBlank, Function.identity());
    /**
     * A path, made absolute and normal however it is given (a value set in code too). It keeps blanks, also
     * around a variable's value: RunDirectoryPath reads {@code MRD_DIR} so for the clients, and daemon and
     * clients must find the same directory.
     */
    public static final SettingType<Path> PATH = new SettingType<>(text -> Path.of(requireNonBlank(text)),
        Path::toString, path -> path.toAbsolutePath().normalize(), path -> false, false, false, null);

    private final Function<String, T> parser;
    private final Function<T, String> formatter;
    private final UnaryOperator<T> canonical;
    private final Predicate<T> none;
    private final boolean trimsVariable;
    private final boolean flag;
    private final SettingType<?> element;

    private SettingType(
        final Function<String, T> parser,
        final Function<T, String> formatter,
        final UnaryOperator<T> canonical,
        final Predicate<T> none,
        final boolean trimsVariable,
        final boolean flag,
        final SettingType<?> element)
    {
        this.parser = parser;
        this.formatter = formatter;
        this.canonical = canonical;
        this.none = none;
        this.trimsVariable = trimsVariable;
        this.flag = flag;
        this.element = element;
    }

    /**
     * @param parser    text to value, throwing any {@link RuntimeException} when the text is not one.
     * @param formatter value to text, such that the parser reads it back.
     * @return a kind whose variables are read without the blanks around them.
     */
    public static <T> SettingType<T> of(final Function<String, T> parser, final Function<T, String> formatter)
    {
        return new SettingType<>(parser, formatter, UnaryOperator.identity(), v -> false, true, false, null);
    }

    /**
     * @param absent how the log and {@code --help} write "none given", e.g. {@code off} or {@code first}.
     * @return the kind of a setting that may have no value: its default is {@link Optional#empty()}.
     */
    public static <T> SettingType<Optional<T>> optional(final SettingType<T> value, final String absent)
    {
        return new SettingType<>(text -> Optional.of(value.parser.apply(text)),
            v -> v.map(value.formatter).orElse(absent), v -> v.map(value.canonical), Optional::isEmpty,
            value.trimsVariable, false, null);
    }

    /**
     * @return the kind of a list of {@code element}s separated by commas: the variable holds them all, the option
     * is repeated or given them separated by commas too.
     */
    public static <T> SettingType<List<T>> commaList(final SettingType<T> element)
    {
        return new SettingType<>(text ->
        {
            final List<T> values = new ArrayList<>();
            for (final String one : text.split(","))
            {
                values.add(element.parser.apply(one.trim()));
            }
            return List.copyOf(values);
        }, List::toString, UnaryOperator.identity(), List::isEmpty, true, false, element);
    }

    /**
     * @return the value {@code text} is.
     * @throws RuntimeException when it is none.
     */
    T parse(final String text)
    {
        return parser.apply(text);
    }

    /**
     * @return the value of a variable's {@code text}: without the blanks around it, but for a path.
     */
    T parseVariable(final String text)
    {
        return parser.apply(trimsVariable ? text.trim() : text);
    }

    /**
     * @return the one form of {@code value} the context holds, e.g. a path made absolute.
     */
    T canonical(final T value)
    {
        return canonical.apply(value);
    }

    /**
     * @return whether {@code value} is "none given" (no device, no groups): no text of the option gives it, and
     * {@code --help} says it in words.
     */
    public boolean isNone(final T value)
    {
        return none.test(value);
    }

    public String format(final T value)
    {
        return formatter.apply(value);
    }

    /**
     * @return whether the option is a flag ({@code --x} and {@code --no-x}) rather than one that takes a value.
     */
    public boolean isFlag()
    {
        return flag;
    }

    /**
     * @return the kind of one element when the value is a list ({@link #commaList}), else null.
     */
    public SettingType<?> element()
    {
        return element;
    }

    private static Boolean parseBoolean(final String text)
    {
        if ("true".equalsIgnoreCase(text) || "false".equalsIgnoreCase(text))
        {
            return Boolean.parseBoolean(text);
        }
        throw new IllegalArgumentException(text);
    }

    private static String requireNonBlank(final String text)
    {
        if (text.isBlank())
        {
            throw new IllegalArgumentException("blank");
        }
        return text;
    }
}
