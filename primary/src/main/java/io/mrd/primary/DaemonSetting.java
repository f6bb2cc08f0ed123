package io.mrd.primary;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;

import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.function.Function;

/**
 * One of the daemon's settings, a row of {@link DaemonSettings}: its name in the log, the kind of its value
 * ({@link SettingType}), its default, its {@code mrd start} option with the option's parameter and help, its
 * {@code MRD_*} variable, the check of its value ({@link SettingCheck}) and what an error says a value should be.
 * Everything else is made from the rows: {@code mrd start}'s options and their help (the cli's
 * {@code SettingOptions}), the reading of the environment, the checks and the log line ({@link DaemonContext}).
 * <p>
 * <b>Adding a setting</b> is one row in {@link DaemonSettings}, in the order the checks run, and its use, where
 * the daemon reads {@code context.get(NEW_SETTING)}. The row needs a name, a kind, a default, an option with a
 * parameter and a help text (or, for a variable without an option, a help text), and the {@code expected}
 * phrase (without a default, a help text or the phrase the class does not load); and a check when the kind
 * takes values the setting does not. The variable is
 * {@code MRD_} and the option's name in capitals unless the row names another one; {@code mrd start --help}
 * names the ones that are not. Nothing else changes: not the context, not the command, not their tests, which
 * take every row as it is ({@code DaemonSettingTest}: its default passes its check and is what its option
 * reads; {@code SettingOptionsTest}: its option is made from it; {@code StartCommandContextTest}: its option
 * reaches the context and beats its variable).
 *
 * @param <T> the value's type.
 */
public final class DaemonSetting<T>
{
    private static final String DEFAULT_IN_HELP = "${DEFAULT-VALUE}";

    private final String name;
    private final SettingType<T> type;
    private final Function<Map<String, String>, T> defaultIn;
    private final String option;
    private final String paramLabel;
    private final String description;
    private final boolean hidden;
    private final String variable;
    private final SettingCheck<T> check;
    private final String expected;

    private DaemonSetting(final Builder<T> row)
    {
        this.name = row.name;
        this.type = row.type;
        this.defaultIn = Objects.requireNonNull(row.defaultIn, () -> row.name + ": no default");
        this.option = row.option;
        this.paramLabel = row.paramLabel;
        this.description = Objects.requireNonNull(row.description, () -> row.name + ": no help text");
        this.hidden = row.hidden;
        this.variable = null != row.variable ? row.variable :
            variableOf(Objects.requireNonNull(row.option, () -> row.name + ": no option and no variable"));
        this.check = row.check;
        this.expected = Objects.requireNonNull(row.expected, () -> row.name + ": no expected phrase");
    }

    /**
     * @return the setting's name in the context's log line, e.g. {@code maxMemory}.
     */
    public String name()
    {
        return name;
    }

    public SettingType<T> type()
    {
        return type;
    }

    /**
     * @return the {@code mrd start} option, e.g. {@code --max-memory}, or null when there is none.
     */
    public String option()
    {
        return option;
    }

    /**
     * @return the option's parameter in {@code --help}, e.g. {@code SIZE}; null for a flag.
     */
    public String paramLabel()
    {
        return paramLabel;
    }

    /**
     * @return what {@code --help} says of the option, its default written in.
     */
    public String help()
    {
        return description.replace(DEFAULT_IN_HELP, type.format(defaultValue()));
    }

    /**
     * @return whether {@code --help} leaves the option out (fault injection, for tests).
     */
    public boolean hidden()
    {
        return hidden;
    }

    public String variable()
    {
        return variable;
    }

    /**
     * @return whether the variable is {@code MRD_} and the option's name in capitals, as {@code mrd start --help}
     * says of all but the ones it names.
     */
    public boolean variableFollowsOption()
    {
        return null != option && variable.equals(variableOf(option));
    }

    private static String variableOf(final String option)
    {
        return "MRD_" + option.substring(2).toUpperCase(Locale.ROOT).replace('-', '_');
    }

    /**
     * @return how the operator names the setting: the option, or the variable when there is none.
     */
    public String displayName()
    {
        return null != option ? option : variable;
    }

    /**
     * @return the default in an empty environment.
     */
    public T defaultValue()
    {
        return defaultIn(Map.of());
    }

    /**
     * @return whether the default is "none given" ({@link SettingType#isNone}), which no text of the option gives.
     */
    public boolean defaultIsNone()
    {
        return type.isNone(defaultValue());
    }

    /**
     * @return the default when nobody gives the setting, which for the run directory depends on the environment.
     */
    T defaultIn(final Map<String, String> env)
    {
        return defaultIn.apply(env);
    }

    /**
     * @return null when {@code value} is right, else the error naming it, without where it came from.
     */
    String refusal(final T value)
    {
        return check.refusal(displayName(), value);
    }

    /**
     * @param text what the option was given.
     * @return its value.
     * @throws MrdException EINVAL saying what the text should be; the message leaves out the option, which
     *                      picocli's "Invalid value for option" names.
     */
    public T parse(final String text)
    {
        return parse(type, text);
    }

    /**
     * @return the value of one element of a list's option ({@link SettingType#commaList}), as {@link #parse}.
     */
    public Object parseElement(final String text)
    {
        return parse(type.element(), text);
    }

    private <V> V parse(final SettingType<V> kind, final String text)
    {
        try
        {
            return kind.parse(text);
        }
        catch (final MrdException ex)
        {
            // It says itself what is wrong with the text (a size that does not fit, a negative address).
            throw ex;
        }
        catch (final RuntimeException ex)
        {
            throw new MrdException(ErrorCode.EINVAL, "'" + text + "' is not " + expected);
        }
    }

    /**
     * @return the value of this setting's variable, or null when it is unset or blank.
     * @throws MrdException EINVAL naming the variable, its text and what it should be.
     */
    T fromEnvironment(final Map<String, String> env)
    {
        final String text = env.get(variable);
        if (null == text || text.isBlank())
        {
            return null;
        }
        try
        {
            return type.parseVariable(text);
        }
        catch (final RuntimeException ex)
        {
            throw new MrdException(ErrorCode.EINVAL, variable + "='" + text + "' is not " + expected +
                ": correct or unset it" + (null == option ? "" : ", or give " + option + " (it beats the variable)"));
        }
    }

    public String toString()
    {
        return name;
    }

    /**
     * @return the start of a row of {@link DaemonSettings}, which {@link Builder#expects} ends.
     */
    static <T> Builder<T> define(final String name, final SettingType<T> type)
    {
        return new Builder<>(name, type);
    }

    /**
     * One row as it is written: {@link #expects} ends it and adds it to {@link DaemonSettings#all()}.
     */
    static final class Builder<T>
    {
        private final String name;
        private final SettingType<T> type;
        private Function<Map<String, String>, T> defaultIn;
        private String option;
        private String paramLabel;
        private String description;
        private boolean hidden;
        private String variable;
        private SettingCheck<T> check = SettingCheck.any();
        private String expected;

        private Builder(final String name, final SettingType<T> type)
        {
            this.name = name;
            this.type = type;
        }

        Builder<T> byDefault(final T value)
        {
            return byDefaultIn(env -> value);
        }

        Builder<T> byDefaultIn(final Function<Map<String, String>, T> defaultIn)
        {
            this.defaultIn = defaultIn;
            return this;
        }

        /**
         * @param description the help text; {@code ${DEFAULT-VALUE}} in it is the default.
         */
        Builder<T> option(final String option, final String paramLabel, final String description)
        {
            this.option = option;
            this.paramLabel = paramLabel;
            this.description = description;
            return this;
        }

        /**
         * @param description the help text, which {@code mrd start --help} prints after the variable's name:
         *                    "MRD_X names ...".
         */
        Builder<T> variableOnly(final String variable, final String description)
        {
            this.variable = variable;
            this.description = description;
            return this;
        }

        /**
         * Names the variable when it is not {@code MRD_} and the option's name in capitals.
         */
        Builder<T> variable(final String variable)
        {
            this.variable = variable;
            return this;
        }

        Builder<T> hidden()
        {
            this.hidden = true;
            return this;
        }

        Builder<T> check(final SettingCheck<T> check)
        {
            this.check = check;
            return this;
        }

        /**
         * @param expected what a value is, for an error about a text that is not one, e.g. {@code a number}.
         * @return the row, added to {@link DaemonSettings#all()}.
         */
        DaemonSetting<T> expects(final String expected)
        {
            this.expected = expected;
            return DaemonSettings.add(new DaemonSetting<>(this));
        }
    }
}
