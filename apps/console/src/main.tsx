import './console.css';
import { Component, type ComponentChildren, render } from 'preact';
import { App, Failed } from './app.tsx';
import { connect } from './tessera.ts';

/** A bug in a view shows a way out instead of a blank page. */
class ErrorBoundary extends Component<{ children: ComponentChildren }, { failed: boolean }> {
  override state = { failed: false };
  static override getDerivedStateFromError() {
    return { failed: true };
  }
  override componentDidCatch(error: unknown) {
    console.error(error);
  }
  override render() {
    return this.state.failed ? (
      <Failed message="Something went wrong on this page. Reload it to continue." />
    ) : (
      this.props.children
    );
  }
}

const listeners = new Set<(signedIn: boolean) => void>();
const tessera = connect((signedIn) => {
  for (const listener of listeners) listener(signedIn);
});
const root = document.getElementById('app');
if (root)
  render(
    <ErrorBoundary>
      <App tessera={tessera} onSessionChange={(listener) => listeners.add(listener)} />
    </ErrorBoundary>,
    root,
  );
