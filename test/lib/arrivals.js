// Things that arrive over time (packets a raw peer receives, lines a child prints), and waiting
// for one of them without polling: `push` wakes the waiter, `next` takes the first item matching
// a predicate (or fails after `ms`), `until` waits for a condition over the items.

/**
 * An empty list of arrivals. `show(items)` describes them in a timeout's message.
 * @returns {{ items: any[], push(x: any): void, next(pred: (x: any) => boolean, ms?: number, what?: string): Promise<any>, until(pred: () => boolean, ms?: number, what?: string): Promise<void> }}
 */
export function arrivals(show = (items) => `${items.length} so far`) {
  const items = [];
  let wake = null;
  /** Wait for the next push or `left` ms. */
  const pause = (left) =>
    new Promise((r) => {
      const t = setTimeout(r, left);
      wake = () => {
        clearTimeout(t);
        r();
      };
    }).then(() => {
      wake = null;
    });
  return {
    items,
    push(x) {
      items.push(x);
      wake?.();
    },
    /** The first item matching `pred`, taken out of the list, or an error after `ms`. */
    async next(pred, ms = 3000, what = 'an item') {
      const end = Date.now() + ms;
      for (;;) {
        const i = items.findIndex(pred);
        if (i >= 0) return items.splice(i, 1)[0];
        const left = end - Date.now();
        if (left <= 0) throw new Error(`no ${what} within ${ms} ms (${show(items)})`);
        await pause(left);
      }
    },
    /** Resolves once `pred()` holds, or fails after `ms`. */
    async until(pred, ms = 3000, what = 'condition') {
      const end = Date.now() + ms;
      while (!pred()) {
        const left = end - Date.now();
        if (left <= 0) throw new Error(`no ${what} within ${ms} ms (${show(items)})`);
        await pause(left);
      }
    },
  };
}
