// An option's value as text for an `InvalidArgument`, whatever it is: strings quoted, numbers as
// JavaScript prints them (JSON would turn NaN and the infinities into null), bigints with their `n`,
// and anything JSON cannot show (a cycle, a bigint inside, a throwing `toJSON`) in its plain form.
// Never throws. Values that may hold credentials go through `Address.redactCredentials` after this.

export const valueText = (value: unknown): string => {
  if (typeof value === "string") return JSON.stringify(value)
  if (typeof value === "number") return String(value)
  if (typeof value === "bigint") return `${value}n`
  try {
    const json = JSON.stringify(value)
    if (json !== undefined) return json
  } catch {
    // Fall through to the plain form.
  }
  try {
    return String(value)
  } catch {
    return Object.prototype.toString.call(value)
  }
}
