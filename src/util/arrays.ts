/**
 * Empty arrays that are born with the elements kind they will have.
 *
 * V8 gives a fresh `[]` small-integer elements; the first object stored turns it into an array of
 * objects, under a new hidden class. Optimised code that has only seen the arrays of one
 * connection (already turned) checks for that class, so the still-empty arrays of the next
 * connection fail the check and throw the code away ("wrong map"), once per function that
 * touches them. An array made from one object element and emptied has the object kind from the
 * start, so every connection's arrays share one hidden class.
 */
export function objectArray<T>(): T[] {
  const a: (T | null)[] = [null];
  a.pop();
  return a as T[];
}
