# etc/ — (filled as code lands)
