// A blank page never (docs/ui.md): an error while drawing the page shows what failed and a way back, not white.
import { Component, type ReactNode } from 'react';

export class CrashPage extends Component<{ children: ReactNode }, { error: Error | null }> {
  override state = { error: null as Error | null };

  static getDerivedStateFromError(error: Error) {
    return { error };
  }

  override render() {
    const { error } = this.state;
    if (!error) return this.props.children;
    return (
      <div className="crash" role="alert">
        <h1>The page failed</h1>
        <p>Drawing the page failed with this error; the engine and its VMs are not affected.</p>
        <pre>{error.stack ?? error.message}</pre>
        <button className="primary" onClick={() => window.location.reload()}>
          Reload the page
        </button>
      </div>
    );
  }
}
