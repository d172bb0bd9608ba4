# clients/ — (filled as code lands)
