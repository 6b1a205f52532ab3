/**
 * What the run has to undo (child processes, databases, worktrees), undone in reverse order once,
 * whether the run ends, fails or is interrupted.
 */
export class Cleanup {
  private readonly steps: Array<{ what: string; undo: () => unknown }> = [];
  private running: Promise<void> | undefined;

  add(what: string, undo: () => unknown): void {
    this.steps.push({ what, undo });
  }

  run(): Promise<void> {
    this.running ??= (async () => {
      for (let step = this.steps.pop(); step; step = this.steps.pop()) {
        try {
          await step.undo();
        } catch (error) {
          console.error(`bench: could not ${step.what}: ${error instanceof Error ? error.message : error}`);
        }
      }
    })();
    return this.running;
  }
}
