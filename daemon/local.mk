# daemon/ — (filled as code lands)
